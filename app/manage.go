package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/happy-dev/happy/relay"
)

// ErrRunning: the session is running (its heartbeat is fresh); archiving or
// deleting it would pull it from under its happy.
var ErrRunning = errors.New("the session is running: end its happy first (or wait until it is stale)")

// Selector picks sessions for bulk archive and delete. Both fields set means
// both must hold; a running session is never selected.
type Selector struct {
	// Ended selects sessions that are over: ended or stale, and archived
	// too when IncludeArchived.
	Ended bool
	// OlderThan selects sessions whose last activity is older than this.
	OlderThan time.Duration
	// IncludeArchived lets Ended select archived sessions (delete).
	IncludeArchived bool
}

// Empty reports whether the selector selects by nothing.
func (s Selector) Empty() bool { return !s.Ended && s.OlderThan <= 0 }

// matches reports whether the selector picks o at now.
func (s Selector) matches(o Opened, now time.Time) bool {
	st := o.State(now)
	if st == LifecycleRunning {
		return false
	}
	if s.Ended && !(st == LifecycleEnded || st == StateStale || (s.IncludeArchived && st == LifecycleArchived)) {
		return false
	}
	if !s.Ended && st == LifecycleArchived && !s.IncludeArchived {
		return false
	}
	if s.OlderThan > 0 && !o.LastActivity().Before(now.Add(-s.OlderThan)) {
		return false
	}
	return true
}

// SelectSessions returns the account's sessions sel picks at now, newest
// activity first. Sessions whose metadata cannot be read are never picked.
func SelectSessions(ctx context.Context, conn *Conn, sel Selector, now time.Time) ([]Opened, error) {
	all, errs, err := listOpened(ctx, conn)
	if err != nil {
		return nil, err
	}
	var out []Opened
	for i, o := range all {
		if errs[i] == nil && sel.matches(o, now) {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastActivity().After(out[j].LastActivity()) })
	return out, nil
}

// Archive marks the session archived: metadata lifecycleState "archived"
// with lifecycleStateSince, archivedBy "cli" and archiveReason "user"
// (compare-and-set over a user-scoped socket, keeping every other field),
// then POST /v1/sessions/:id/archive, which makes it inactive on the relay.
// A running session is refused with ErrRunning; an archived one is left as
// it is.
func Archive(ctx context.Context, conn *Conn, o Opened, now time.Time) error {
	switch o.State(now) {
	case LifecycleRunning:
		return fmt.Errorf("%s: %w", o.Info.ID, ErrRunning)
	case LifecycleArchived:
		return nil
	}
	if o.Cipher == nil || o.RawMetadata == nil {
		return fmt.Errorf("%s: its metadata cannot be read: %w", o.Info.ID, ErrRelay)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sock, err := relay.SIODialer(10*time.Second)(ctx, conn.URL, map[string]any{"token": conn.Creds.Token, "clientType": "user-scoped"})
	if err != nil {
		return fmt.Errorf("%w: connect to the relay: %w", ErrRelay, err)
	}
	defer sock.Close()
	fields := lifecycleFields(LifecycleArchived, now)
	fields["archivedBy"] = json.RawMessage(`"cli"`)
	fields["archiveReason"] = json.RawMessage(`"user"`)
	fields["lastActivityAt"] = json.RawMessage(strconv.FormatInt(o.LastActivity().UnixMilli(), 10))
	if _, _, err := relay.UpdateSessionMetadata(ctx, sock, o.Info.ID, o.Cipher, o.RawMetadata, o.Info.MetadataVersion, 0, mergeFields(fields)); err != nil {
		return fmt.Errorf("archive %s: %w", o.Info.ID, err)
	}
	if err := conn.API.ArchiveSession(ctx, o.Info.ID); err != nil {
		return fmt.Errorf("archive %s: %w", o.Info.ID, err)
	}
	return nil
}

// Delete removes the session and all its messages from the relay (DELETE
// /v1/sessions/:id) and forgets its live record in this home's outbox, so
// no later happy tries to settle it. A running session is refused with
// ErrRunning.
func Delete(ctx context.Context, conn *Conn, o Opened, now time.Time) error {
	if o.State(now) == LifecycleRunning {
		return fmt.Errorf("%s: %w", o.Info.ID, ErrRunning)
	}
	if err := conn.API.DeleteSession(ctx, o.Info.ID); err != nil {
		return fmt.Errorf("delete %s: %w", o.Info.ID, err)
	}
	forgetLive(ctx, conn, o.Info.ID)
	return nil
}

// forgetLive clears the outbox's live record of the session with relay id.
func forgetLive(ctx context.Context, conn *Conn, relayID string) {
	ob := conn.Client.Outbox()
	live, err := ob.LiveSessions(ctx)
	if err != nil {
		return
	}
	for _, l := range live {
		if id, _, ok, err := ob.Session(ctx, l.Session); err == nil && ok && id == relayID {
			_ = ob.ClearLive(ctx, l.Session)
		}
	}
}
