-- Initial schema of the relay's embedded store. Times are Unix milliseconds.
-- Opaque client strings (metadata, states, content, keys) are TEXT, stored as received.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    public_key  TEXT NOT NULL UNIQUE,
    seq         INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY,
    account_id          TEXT NOT NULL REFERENCES accounts(id),
    tag                 TEXT NOT NULL,
    seq                 INTEGER NOT NULL DEFAULT 0,
    metadata            TEXT NOT NULL,
    metadata_version    INTEGER NOT NULL DEFAULT 0,
    agent_state         TEXT,
    agent_state_version INTEGER NOT NULL DEFAULT 0,
    data_encryption_key TEXT,
    active              INTEGER NOT NULL DEFAULT 1,
    last_active_at      INTEGER NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (account_id, tag)
);
CREATE INDEX sessions_account_updated ON sessions (account_id, updated_at DESC);
CREATE INDEX sessions_active ON sessions (active, last_active_at);

CREATE TABLE session_messages (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    local_id    TEXT,
    content     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (session_id, seq),
    UNIQUE (session_id, local_id)
);

CREATE TABLE machines (
    account_id           TEXT NOT NULL REFERENCES accounts(id),
    id                   TEXT NOT NULL,
    metadata             TEXT NOT NULL,
    metadata_version     INTEGER NOT NULL DEFAULT 0,
    daemon_state         TEXT,
    daemon_state_version INTEGER NOT NULL DEFAULT 0,
    data_encryption_key  TEXT,
    seq                  INTEGER NOT NULL DEFAULT 0,
    active               INTEGER NOT NULL DEFAULT 0,
    last_active_at       INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    PRIMARY KEY (account_id, id)
);
CREATE INDEX machines_active ON machines (active, last_active_at);

CREATE TABLE terminal_auth_requests (
    id                  TEXT PRIMARY KEY,
    public_key          TEXT NOT NULL UNIQUE,
    supports_v2         INTEGER NOT NULL DEFAULT 0,
    response            TEXT,
    response_account_id TEXT REFERENCES accounts(id),
    created_at          INTEGER NOT NULL
);

CREATE TABLE push_tokens (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    token       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (account_id, token)
);

CREATE TABLE usage_reports (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    session_id  TEXT NOT NULL DEFAULT '',
    key         TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (account_id, session_id, key)
);
