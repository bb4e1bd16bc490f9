-- Used sign-in challenges (POST /v1/auth), as in the SQLite store: a signed
-- challenge mints a token once. digest is the hex SHA-256 of the public key
-- and the challenge; keep_until (Unix milliseconds) is when the row may go:
-- the end of a timestamped challenge's window, or 9223372036854775807 (kept
-- for good) for a plain random one.

CREATE TABLE auth_challenges (
    digest      BYTEA PRIMARY KEY,
    used_at     BIGINT NOT NULL,
    keep_until  BIGINT NOT NULL
);

CREATE INDEX auth_challenges_keep_until ON auth_challenges (keep_until);
