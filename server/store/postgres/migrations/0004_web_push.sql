-- Web Push subscriptions (RFC 8030, RFC 8291) of the account's browsers, as
-- in the SQLite store: the push service endpoint the relay posts to, and the
-- browser's P-256 public key and auth secret (base64url) it encrypts for.
-- One row per account and endpoint; the relay removes a row the push service
-- answers 404 or 410 for, and every row of an account whose tokens are
-- revoked.

CREATE TABLE web_push_subscriptions (
    id          TEXT COLLATE "C" PRIMARY KEY,
    account_id  TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
    endpoint    BYTEA NOT NULL,
    p256dh      BYTEA NOT NULL,
    auth        BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    UNIQUE (account_id, endpoint)
);
