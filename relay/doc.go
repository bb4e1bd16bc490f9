// Package relay is happy's client of the relay (the reference happy-server
// contract, implemented by `happy server` too): the HTTP API, the Socket.IO
// connection for RPC, presence and state updates, and the durable outbox that
// delivers every encrypted message version exactly once.
//
// # Layers
//
//   - API: plain HTTP calls (auth, sessions, machines, archive, v3 message
//     batches), each bounded by a timeout, errors typed by sentinel
//     (ErrUnauthorized, ErrNotFound, ErrRejected, ErrUnavailable, ErrProtocol).
//   - Client: one account on one relay. It owns the durable outbox
//     (relay/outbox, under the home folder's outbox/) and, in the background,
//     drains the rows of sessions whose process died (ResumeOrphans).
//   - Session: what the session runner uses.
//   - Machine: this machine's record, heartbeat, state and RPC.
//
// # Session, for the runner
//
//	c, _ := relay.New(ctx, relay.Config{BaseURL: url, Credentials: creds, OutboxDir: home.Outbox()})
//	s, _ := c.OpenSession(ctx, relay.SessionOptions{Tag: tag, Metadata: meta})
//	v, _ := s.Enqueue(ctx, messageID, func(v int64) ([]byte, error) { return envelope(v), nil })
//	for in := range s.Receive() { … in.Plaintext or in.Err … }
//	s.RegisterRPC("permission", handler)
//	s.UpdateAgentState(ctx, func(cur json.RawMessage) (json.RawMessage, error) { … })
//	s.Flush(ctx); s.End(ctx); s.Close()
//
// Enqueue assigns the record's next version (monotonic across restarts: the
// last version per record is kept in the outbox), lets the caller build the
// plaintext envelope with it, encrypts it with the session key and returns
// once the version is fsync'd in the outbox (group commit). A sender sends the
// outbox oldest first in batches of up to 100 with localId
// "<recordId>.<version>", removes rows only after the relay returned their
// seq, and backs off exponentially with jitter on failure; a batch the relay
// refuses as such is split until the refused version is alone, which is then
// moved to the outbox's rejected rows (kept and counted, never dropped). A
// row the relay answers as stored before the post (no "new" in its receipt)
// is read back and compared byte for byte; a row under our localId that is
// not ours is a conflict (logged, counted, noted in the outbox's conflicts
// table) and the version is written again under the record's next version.
//
// The relay's answer to a session's creation is checked (checkCreated): a
// new session must be the fresh one this client sent (its wrapped key and
// metadata, no message), a reopened one keep its id and key; anything else
// is ErrForeignSession, never a session adopted with the account secret.
//
// A relay that is down at start-up is not fatal: OpenSession succeeds, the
// session is created on the relay (idempotently, by tag) once it answers,
// and the outbox drains then. A configured relay is never replaced by
// another one.
//
// Receive delivers the session's messages in seq order, once each: a live
// new-message event is applied only when it is exactly the next seq;
// otherwise, after every (re)connection, and when one of our acknowledged
// seqs stays unseen, the path fetches with after_seq until caught up.
// Messages whose localId names a version this client enqueued (its echo)
// advance the position without being delivered. A message that does not
// decrypt is delivered with a *DecryptError (wrong key, wrong variant, bad
// base64) and counted in Stats; one SessionOptions.CheckRecord refuses (not
// the record version its localId names) with a *RecordError.
//
// Metadata and agent state are compare-and-set: on version-mismatch the
// relay's value is adopted and the updater runs again (MaxCASAttempts). Every
// socket call waits at most Config.AckTimeout; a missing acknowledgement is
// an ErrUnavailable error, never a hang. RPC methods ("<sessionId>:<name>")
// are registered again after every reconnection.
//
// # Following a session
//
// API.FollowMessages reads a session's rows over the relay's Server-Sent
// Events stream (GET /v3/sessions/:id/messages/stream, served by `happy
// server`), resuming after the last row delivered on every reconnection,
// until the relay says the session ended. A relay without the stream (the
// reference relay) gives ErrStreamUnsupported: poll FetchMessages instead.
package relay
