package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/happy-dev/happy/server/store"
)

// Attachments are files under Options.AttachmentsDir, at
// sessions/<session id>/attachments/<name> (the reference relay's local
// storage layout), each written atomically (a temporary file, fsync,
// rename) with its modification time set to the write's time. A session's
// folder is removed after the session's row is deleted; attMu keeps a write
// that found the session from landing after that removal.

// attachmentPath returns the file of (sid, name), or false when either
// cannot name a file inside the folder.
func (s *Store) attachmentPath(sid, name string) (string, bool) {
	if !safeSegment(sid) || !store.ValidAttachmentName(name) {
		return "", false
	}
	return filepath.Join(s.attDir, "sessions", sid, "attachments", name), true
}

// safeSegment reports whether v is usable as one path element.
func safeSegment(v string) bool {
	return v != "" && v != "." && v != ".." && !strings.ContainsAny(v, "/\\\x00")
}

// PutAttachment implements store.Store.
func (s *Store) PutAttachment(ctx context.Context, accountID, sessionID, name string, data []byte, now int64) error {
	if !store.ValidAttachmentName(name) {
		return fmt.Errorf("sqlite: put attachment: invalid name %q", name)
	}
	s.attMu.Lock()
	defer s.attMu.Unlock()
	if err := s.ownsSession(ctx, accountID, sessionID); err != nil {
		return err
	}
	path, ok := s.attachmentPath(sessionID, name)
	if !ok {
		return store.ErrNotFound
	}
	return writeFileAtomic(path, data, now)
}

// Attachment implements store.Store.
func (s *Store) Attachment(ctx context.Context, accountID, sessionID, name string) ([]byte, error) {
	path, ok := s.attachmentPath(sessionID, name)
	if !ok {
		return nil, store.ErrNotFound
	}
	if err := s.ownsSession(ctx, accountID, sessionID); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read attachment: %w", err)
	}
	return b, nil
}

// removeAttachments removes the folder of a deleted session. A folder that
// cannot be removed stays behind unreachable (its session is gone); the
// deletion itself has happened, so it is not reported as failed.
func (s *Store) removeAttachments(sid string) error {
	if !safeSegment(sid) {
		return nil
	}
	s.attMu.Lock()
	defer s.attMu.Unlock()
	_ = os.RemoveAll(filepath.Join(s.attDir, "sessions", sid))
	return nil
}

// writeFileAtomic writes b to dst through a temporary file in the same
// folder, with modification time at (Unix ms).
func writeFileAtomic(dst string, b []byte, at int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("sqlite: create attachment folder: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".upload-*")
	if err != nil {
		return fmt.Errorf("sqlite: create attachment: %w", err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	t := time.UnixMilli(at)
	terr := os.Chtimes(tmp.Name(), t, t)
	if err := errors.Join(werr, serr, cerr, terr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("sqlite: write attachment: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("sqlite: store attachment: %w", err)
	}
	return nil
}

// sessionAttachments lists the attachment files of one session folder
// under root, by name (temporary upload files excluded).
func sessionAttachments(root, sid string) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(filepath.Join(root, "sessions", sid, "attachments"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := ents[:0]
	for _, e := range ents {
		if e.Type().IsRegular() && store.ValidAttachmentName(e.Name()) {
			out = append(out, e)
		}
	}
	return out, nil
}
