-- Initial schema of the relay's PostgreSQL store: the tables, columns and
-- constraints of the embedded SQLite store's, so that both answer alike and
-- `happy server migrate --from … --to …` copies rows one to one. Times are
-- Unix milliseconds.
--
-- Ids the store generates are TEXT in the "C" collation (bytewise order, as
-- SQLite's). Every string a client supplies (tags, local ids, machine ids,
-- tokens, keys, and the opaque metadata, states and ciphertext) is BYTEA:
-- PostgreSQL's TEXT refuses a NUL character, which SQLite stores and JSON can
-- carry (\u0000), and BYTEA also compares bytewise.

CREATE TABLE accounts (
    id          TEXT COLLATE "C" PRIMARY KEY,
    public_key  BYTEA NOT NULL UNIQUE,
    seq         BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE sessions (
    id                  TEXT COLLATE "C" PRIMARY KEY,
    account_id          TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
    tag                 BYTEA NOT NULL,
    seq                 BIGINT NOT NULL DEFAULT 0,
    metadata            BYTEA NOT NULL,
    metadata_version    BIGINT NOT NULL DEFAULT 0,
    agent_state         BYTEA,
    agent_state_version BIGINT NOT NULL DEFAULT 0,
    data_encryption_key BYTEA,
    active              BOOLEAN NOT NULL DEFAULT TRUE,
    last_active_at      BIGINT NOT NULL,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    UNIQUE (account_id, tag)
);
CREATE INDEX sessions_account_updated ON sessions (account_id, updated_at DESC);
CREATE INDEX sessions_active ON sessions (active, last_active_at);

CREATE TABLE session_messages (
    id          TEXT COLLATE "C" PRIMARY KEY,
    session_id  TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    local_id    BYTEA,
    content     BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    UNIQUE (session_id, seq),
    UNIQUE (session_id, local_id)
);

CREATE TABLE machines (
    account_id           TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
    id                   BYTEA NOT NULL,
    metadata             BYTEA NOT NULL,
    metadata_version     BIGINT NOT NULL DEFAULT 0,
    daemon_state         BYTEA,
    daemon_state_version BIGINT NOT NULL DEFAULT 0,
    data_encryption_key  BYTEA,
    seq                  BIGINT NOT NULL DEFAULT 0,
    active               BOOLEAN NOT NULL DEFAULT FALSE,
    last_active_at       BIGINT NOT NULL,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    PRIMARY KEY (account_id, id)
);
CREATE INDEX machines_active ON machines (active, last_active_at);

CREATE TABLE terminal_auth_requests (
    id                  TEXT COLLATE "C" PRIMARY KEY,
    public_key          BYTEA NOT NULL UNIQUE,
    supports_v2         BOOLEAN NOT NULL DEFAULT FALSE,
    response            BYTEA,
    response_account_id TEXT COLLATE "C" REFERENCES accounts(id),
    created_at          BIGINT NOT NULL
);

CREATE TABLE push_tokens (
    id          TEXT COLLATE "C" PRIMARY KEY,
    account_id  TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
    token       BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    UNIQUE (account_id, token)
);

CREATE TABLE usage_reports (
    id          TEXT COLLATE "C" PRIMARY KEY,
    account_id  TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
    session_id  BYTEA NOT NULL DEFAULT '',
    key         BYTEA NOT NULL,
    data        BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    UNIQUE (account_id, session_id, key)
);

-- Attachments: the clients' encrypted blobs (the SQLite store keeps them as
-- files beside its database), removed with their session.
CREATE TABLE attachments (
    session_id  TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    name        TEXT COLLATE "C" NOT NULL,
    data        BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, name)
);
