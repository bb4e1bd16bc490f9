package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// Errors of session lookup.
var (
	ErrNoSession        = errors.New("no such session")
	ErrAmbiguousSession = errors.New("session prefix matches several sessions")
)

// SessionSummary is one line of `happy sessions`.
type SessionSummary struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Agent string `json:"agent"`
	Path  string `json:"path"`
	// State is running, ended, archived or stale (State).
	State string `json:"state"`
	// Active is the relay's presence flag.
	Active       bool      `json:"active"`
	LastActivity time.Time `json:"lastActivity"`
	CreatedAt    time.Time `json:"createdAt"`
	// OneShot: the session runs one prompt only (-p); Yolo: it allows
	// every tool call without asking (--yolo).
	OneShot bool `json:"oneShot,omitempty"`
	Yolo    bool `json:"yolo,omitempty"`
	// Error says why the metadata could not be read (wrong key, …); the
	// session is still listed.
	Error string `json:"error,omitempty"`
}

// Opened is a relay session a reader can decrypt.
type Opened struct {
	Info     relay.SessionInfo
	Cipher   crypto.Cipher
	Metadata Metadata
	// RawMetadata is the decrypted metadata JSON as the relay holds it
	// (nil when it could not be read), for compare-and-set updates that
	// keep fields happy does not know.
	RawMetadata json.RawMessage
}

// Title is the session's title as every reader shows it: metadata
// summary.text, else the last element of its folder, else "(untitled)".
func (o Opened) Title() string {
	if o.Metadata.Summary != nil && strings.TrimSpace(o.Metadata.Summary.Text) != "" {
		return o.Metadata.Summary.Text
	}
	if o.Metadata.Path != "" {
		return filepath.Base(o.Metadata.Path)
	}
	return "(untitled)"
}

// TitleOf is the title of o whose transcript's root session is root: its
// metadata summary, else the root session's own title (an imported
// reference session's first prompt, refimport.Importer), else Title's
// fallbacks.
func (o Opened) TitleOf(root mapper.Session) string {
	if o.Metadata.Summary == nil || strings.TrimSpace(o.Metadata.Summary.Text) == "" {
		if t := strings.TrimSpace(root.Title); t != "" {
			return t
		}
	}
	return o.Title()
}

// State is the session's state at now (State).
func (o Opened) State(now time.Time) string { return State(o.Info, o.Metadata, now) }

// LastHeartbeat is the session's last sign of life that State measures
// staleness from: the latest of the relay's activeAt, lifecycleStateSince
// and the creation time.
func (o Opened) LastHeartbeat() time.Time {
	return time.UnixMilli(max(o.Info.ActiveAt, o.Metadata.LifecycleStateSince, o.Info.CreatedAt)).UTC()
}

// StateUnknown is the state of a session whose metadata this device cannot
// open (`happy sessions` shows it rather than guess "running").
const StateUnknown = "unknown"

// LastActivity is the latest of the relay's activeAt and updatedAt; for an
// archived session the activity it had when it was archived (the archive's
// own write is no activity).
func (o Opened) LastActivity() time.Time {
	if o.Metadata.LifecycleState == LifecycleArchived && o.Metadata.LastActivityAt > 0 {
		return time.UnixMilli(o.Metadata.LastActivityAt).UTC()
	}
	return time.UnixMilli(max(o.Info.ActiveAt, o.Info.UpdatedAt)).UTC()
}

// ListSessions returns the account's sessions, newest activity first, with
// decrypted metadata and their state at now.
func ListSessions(ctx context.Context, conn *Conn, now time.Time) ([]SessionSummary, error) {
	opened, errs, err := listOpened(ctx, conn)
	if err != nil {
		return nil, err
	}
	out := make([]SessionSummary, 0, len(opened))
	for i, o := range opened {
		s := SessionSummary{ID: o.Info.ID, Active: o.Info.Active, LastActivity: o.LastActivity(), CreatedAt: time.UnixMilli(o.Info.CreatedAt).UTC(),
			Agent: o.Metadata.Flavor, Path: o.Metadata.Path, Title: o.Title(), State: o.State(now),
			OneShot: o.Metadata.OneShot, Yolo: o.Metadata.Yolo}
		if errs[i] != nil {
			// Its metadata does not open here: its state is not known
			// (the relay's active flag says only whether it lives).
			s.Error, s.Title, s.State = errs[i].Error(), "", StateUnknown
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastActivity.After(out[j].LastActivity) })
	return out, nil
}

// listOpened lists the account's sessions and opens each; errs[i] is why
// session i could not be decrypted (its Opened has the relay's fields only).
func listOpened(ctx context.Context, conn *Conn) ([]Opened, []error, error) {
	infos, err := conn.API.ListSessions(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Opened, len(infos))
	errs := make([]error, len(infos))
	for i, info := range infos {
		out[i], errs[i] = open(ctx, conn, info)
	}
	return out, errs, nil
}

// open opens a session's cipher and decrypts its metadata. Without the
// account secret (a dataKey device) a session this machine created opens
// with the key its outbox kept (relay.Client.LocalSessionCipher).
func open(ctx context.Context, conn *Conn, info relay.SessionInfo) (Opened, error) {
	o := Opened{Info: info}
	dek := ""
	if info.DataEncryptionKey != nil {
		dek = *info.DataEncryptionKey
	}
	c, err := conn.Creds.OpenSession(dek)
	if errors.Is(err, crypto.ErrNoAccountSecret) && conn.Client != nil {
		if lc, ok, lerr := conn.Client.LocalSessionCipher(ctx, info.ID); lerr != nil {
			err = fmt.Errorf("%w (and this machine's copy of the key: %w)", err, lerr)
		} else if ok {
			c, err = lc, nil
		}
	}
	if err != nil {
		return o, fmt.Errorf("open session key: %w", err)
	}
	o.Cipher = c
	if info.Metadata != "" {
		raw, err := crypto.DecodeBase64(info.Metadata)
		if err != nil {
			return o, fmt.Errorf("metadata: %w", err)
		}
		plain, err := c.Open(raw)
		if err != nil {
			return o, fmt.Errorf("metadata: %w", err)
		}
		if err := json.Unmarshal(plain, &o.Metadata); err != nil {
			return o, fmt.Errorf("metadata: %w", err)
		}
		o.RawMetadata = plain
	}
	return o, nil
}

// FindSession returns the session whose id is, or starts with, ref.
func FindSession(ctx context.Context, conn *Conn, ref string) (Opened, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Opened{}, fmt.Errorf("%w: empty session id", ErrNoSession)
	}
	infos, err := conn.API.ListSessions(ctx)
	if err != nil {
		return Opened{}, err
	}
	var match []relay.SessionInfo
	for _, info := range infos {
		if info.ID == ref {
			match = []relay.SessionInfo{info}
			break
		}
		if strings.HasPrefix(info.ID, ref) {
			match = append(match, info)
		}
	}
	switch len(match) {
	case 0:
		return Opened{}, fmt.Errorf("%w: %s (happy sessions lists them)", ErrNoSession, ref)
	case 1:
		return open(ctx, conn, match[0])
	}
	ids := make([]string, len(match))
	for i, m := range match {
		ids[i] = m.ID
	}
	return Opened{}, fmt.Errorf("%w: %s matches %s", ErrAmbiguousSession, ref, strings.Join(ids, ", "))
}

// ReadOptions tune ReadTranscript.
type ReadOptions struct {
	// AfterSeq continues an earlier read (with Into); 0 reads everything.
	AfterSeq int64
	// Into is the Readback to add to (a new one when nil).
	Into *session.Readback
}

// ReadTranscript fetches every message of the session after opts.AfterSeq,
// decrypts it into a Readback and returns it with the last seq read.
// Messages that do not decrypt become Dropped records (reason
// decrypt_failed), never skipped.
func ReadTranscript(ctx context.Context, conn *Conn, o Opened, opts ReadOptions) (*session.Readback, int64, error) {
	rb := opts.Into
	if rb == nil {
		rb = readbackOf(o)
	}
	after := opts.AfterSeq
	for {
		page, err := conn.API.FetchMessages(ctx, o.Info.ID, after, relay.MaxFetchLimit)
		if err != nil {
			return rb, after, err
		}
		for _, m := range page.Messages {
			after = max(after, m.Seq)
			plain, err := decrypt(o.Cipher, m.Content.C)
			if err != nil {
				rb.Drop(agent.Dropped{Source: session.DroppedSourceRelay, Line: m.Seq, Reason: agent.DropDecryptFailed, Detail: err.Error()})
				continue
			}
			rb.Add(m.Seq, m.LocalIDOrEmpty(), plain)
		}
		if !page.HasMore || len(page.Messages) == 0 {
			return rb, after, nil
		}
	}
}

// readbackOf is an empty Readback of o's session (its fallback root the
// session as the relay lists it, with its agentState).
func readbackOf(o Opened) *session.Readback { return withState(o, session.NewReadback(fallbackOf(o))) }

// withState gives rb o's agentState, which a session the reference CLI
// wrote keeps its permissions in (session.Readback.SetAgentState); one
// that does not decrypt is left out (a session of happy's needs none).
func withState(o Opened, rb *session.Readback) *session.Readback {
	if o.Info.AgentState != nil && *o.Info.AgentState != "" {
		if plain, err := decrypt(o.Cipher, *o.Info.AgentState); err == nil {
			rb.SetAgentState(plain)
		}
	}
	return rb
}

// fallbackOf is the root session of o's document when no session record
// names one: the session as the relay lists it.
func fallbackOf(o Opened) mapper.Session {
	title := ""
	if o.Metadata.Summary != nil {
		title = strings.TrimSpace(o.Metadata.Summary.Text)
	}
	return mapper.Session{ID: o.Info.ID, Directory: o.Metadata.Path, Title: title,
		Time: mapper.SessionTime{Created: o.Info.CreatedAt, Updated: o.Info.UpdatedAt}}
}

func decrypt(c crypto.Cipher, content string) ([]byte, error) {
	raw, err := crypto.DecodeBase64(content)
	if err != nil {
		return nil, err
	}
	return c.Open(raw)
}

// RowEvent is one row read by FollowSession: its seq, the localId it was
// stored under and its decrypted plaintext (for session.Readback.Add), or
// (Dropped set) the record that stands for a row that did not decrypt or a
// frame the stream reader refused. From FollowSessionEvents it may instead
// be a live text delta (Live set; Seq 0), or one that did not decrypt or
// decode (LiveErr set).
type RowEvent struct {
	Seq     int64
	LocalID string
	Plain   []byte
	Dropped *agent.Dropped
	Live    *session.LiveDelta
	LiveErr error
}

// FollowSession follows o's rows after seq `after` over the relay's message
// stream (Server-Sent Events, relay.API.FollowMessages) and hands each to
// out, in seq order and once, blocking until it is taken or ctx ends. It
// returns nil when the relay ends the stream (the session went inactive or
// was deleted), relay.ErrStreamUnsupported for a relay without the stream
// (the reference relay: callers poll with ReadTranscript instead), or the
// error that stopped it (ctx.Err() when ctx ended).
func FollowSession(ctx context.Context, conn *Conn, o Opened, after int64, out chan<- RowEvent) error {
	return FollowSessionLive(ctx, conn, o, after, out, nil)
}

// FollowSessionLive is FollowSession that also hands each live text delta
// the stream carries (docs/ARCHITECTURE.md, section "Live text") to onLive,
// decrypted and decoded, on the stream's goroutine (it must not block); a
// delta that does not decrypt or decode comes with its error instead (it
// is not part of the transcript: the stored versions carry the text). A
// nil onLive skips them, as does a relay that does not send them.
func FollowSessionLive(ctx context.Context, conn *Conn, o Opened, after int64, out chan<- RowEvent, onLive func(session.LiveDelta, error)) error {
	send := func(ev RowEvent) error {
		select {
		case out <- ev:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	opts := relay.FollowOptions{AfterSeq: after, OnDrop: func(d relay.FollowDrop) {
		_ = send(RowEvent{Seq: d.Seq, Dropped: &agent.Dropped{Source: session.DroppedSourceRelay, Line: d.Seq,
			Reason: agent.DropInvalidField, Kind: d.Reason, Detail: d.Detail}})
	}}
	if onLive != nil {
		opts.OnTextDelta = func(sealed string) {
			plain, err := decrypt(o.Cipher, sealed)
			if err != nil {
				onLive(session.LiveDelta{}, fmt.Errorf("live text delta: %w", err))
				return
			}
			onLive(session.DecodeLiveDelta(plain))
		}
	}
	_, err := conn.API.FollowMessages(ctx, o.Info.ID, opts, func(m relay.StoredMessage) error {
		plain, err := decrypt(o.Cipher, m.Content.C)
		if err != nil {
			return send(RowEvent{Seq: m.Seq, Dropped: &agent.Dropped{Source: session.DroppedSourceRelay, Line: m.Seq,
				Reason: agent.DropDecryptFailed, Detail: err.Error()}})
		}
		return send(RowEvent{Seq: m.Seq, LocalID: m.LocalIDOrEmpty(), Plain: plain})
	})
	return err
}
