// Package localapi is happy's local event API: live changes of the sessions
// this process runs, as Server-Sent Events with seed 001's event names, and
// their canonical documents as JSON, on a loopback address with a bearer
// token kept in the happy home folder (docs/ARCHITECTURE.md, section "Local
// event API").
//
// A Hub receives the reducer's changes (mapper.BusEvent) of any number of
// sessions, folds them into documents (GET /session, GET
// /session/{id}/message) and fans them out to subscribers (GET /event) with
// per-subscriber back-pressure: deltas may be dropped and are counted, state
// changes never are. Handler and Server are the HTTP side; LoadOrCreateToken
// keeps the token.
//
// Frames are written with internal/sse: "event: <name>" and one data line
// {"type": <name>, "properties": {…}} (mapper.EncodeChange's shape), no id
// (a reconnecting client re-reads the documents; nothing is replayed).
package localapi
