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
	ID           string    `json:"id"`
	Title        string    `json:"title"`
	Agent        string    `json:"agent"`
	Path         string    `json:"path"`
	State        string    `json:"state"` // lifecycleState, or "active"/"inactive" from presence
	Active       bool      `json:"active"`
	LastActivity time.Time `json:"lastActivity"`
	CreatedAt    time.Time `json:"createdAt"`
	// Error says why the metadata could not be read (wrong key, …); the
	// session is still listed.
	Error string `json:"error,omitempty"`
}

// Opened is a relay session a reader can decrypt.
type Opened struct {
	Info     relay.SessionInfo
	Cipher   crypto.Cipher
	Metadata Metadata
}

// ListSessions returns the account's sessions, newest activity first, with
// decrypted metadata.
func ListSessions(ctx context.Context, conn *Conn) ([]SessionSummary, error) {
	infos, err := conn.API.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SessionSummary, 0, len(infos))
	for _, info := range infos {
		s := SessionSummary{ID: info.ID, Active: info.Active, LastActivity: time.UnixMilli(info.ActiveAt).UTC(), CreatedAt: time.UnixMilli(info.CreatedAt).UTC()}
		if info.UpdatedAt > info.ActiveAt {
			s.LastActivity = time.UnixMilli(info.UpdatedAt).UTC()
		}
		o, err := open(conn, info)
		if err != nil {
			s.Error = err.Error()
		} else {
			s.Agent, s.Path, s.State = o.Metadata.Flavor, o.Metadata.Path, o.Metadata.LifecycleState
			if o.Metadata.Summary != nil {
				s.Title = o.Metadata.Summary.Text
			}
			if s.Title == "" && s.Path != "" {
				s.Title = filepath.Base(s.Path)
			}
		}
		if s.State == "" {
			s.State = map[bool]string{true: "active", false: "inactive"}[info.Active]
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastActivity.After(out[j].LastActivity) })
	return out, nil
}

// open opens a session's cipher and decrypts its metadata.
func open(conn *Conn, info relay.SessionInfo) (Opened, error) {
	o := Opened{Info: info}
	dek := ""
	if info.DataEncryptionKey != nil {
		dek = *info.DataEncryptionKey
	}
	c, err := conn.Creds.OpenSession(dek)
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
		return open(conn, match[0])
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
		rb = session.NewReadback(mapper.Session{ID: o.Info.ID, Directory: o.Metadata.Path,
			Time: mapper.SessionTime{Created: o.Info.CreatedAt, Updated: o.Info.UpdatedAt}})
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
			rb.Add(m.Seq, plain)
		}
		if !page.HasMore || len(page.Messages) == 0 {
			return rb, after, nil
		}
	}
}

func decrypt(c crypto.Cipher, content string) ([]byte, error) {
	raw, err := crypto.DecodeBase64(content)
	if err != nil {
		return nil, err
	}
	return c.Open(raw)
}
