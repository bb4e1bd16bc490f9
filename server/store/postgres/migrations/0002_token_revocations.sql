-- Token revocation (POST /v1/auth/revoke), as in the SQLite store: a token
-- is valid only while it carries its account's current generation; revoking
-- moves the generation on. An account without a row is at generation 0.
-- Times are Unix milliseconds.

CREATE TABLE token_revocations (
    account_id  TEXT COLLATE "C" PRIMARY KEY REFERENCES accounts(id),
    generation  BIGINT NOT NULL,
    revoked_at  BIGINT NOT NULL
);

CREATE INDEX terminal_auth_requests_created ON terminal_auth_requests (created_at);
