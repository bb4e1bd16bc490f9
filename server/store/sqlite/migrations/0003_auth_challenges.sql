-- Used sign-in challenges (POST /v1/auth): a signed challenge mints a token
-- once. digest is the hex SHA-256 of the public key and the challenge;
-- keep_until (Unix milliseconds) is when the row may go: the end of a
-- timestamped challenge's window, or 9223372036854775807 (kept for good)
-- for a plain random one.

CREATE TABLE auth_challenges (
    digest      TEXT PRIMARY KEY,
    used_at     INTEGER NOT NULL,
    keep_until  INTEGER NOT NULL
);

CREATE INDEX auth_challenges_keep_until ON auth_challenges (keep_until);
