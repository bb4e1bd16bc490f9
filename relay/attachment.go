package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/happy-dev/happy/crypto"
)

// MaxAttachmentBytes is the largest blob happy uploads: the encrypted size,
// as happy's relay limits it by default (server.DefaultMaxAttachment, 10
// MiB; a PUT past it is 413). Plaintext may be MaxAttachmentBytes minus the
// cipher's overhead (29 bytes for AES-GCM, 40 for secretbox).
const MaxAttachmentBytes = 10 << 20

// ErrAttachmentTooLarge is returned (wrapped, with the sizes) for a file
// whose encrypted bytes exceed MaxAttachmentBytes, or that the relay refused
// with 413.
var ErrAttachmentTooLarge = errors.New("attachment too large")

// ErrAttachmentNotFound is returned (wrapped) when the relay has no blob
// for a reference (404), or the reference is not one of the session's.
var ErrAttachmentNotFound = errors.New("attachment not found")

// UploadAttachment encrypts plaintext with cipher (the session's content
// cipher, the same one its records use) and stores it on the relay as a
// blob of session sessionID (reference contract "attachments":
// request-upload {filename, size} → {ref, uploadUrl, method: "PUT"}, then a
// PUT of the sealed bytes). It returns the ref,
// "sessions/<sid>/attachments/<uuid>.enc". The relay only ever sees the
// ciphertext. Errors: ErrAttachmentTooLarge past MaxAttachmentBytes,
// *StatusError for other refusals, ErrUnavailable, ErrProtocol for an upload
// URL that is not on this relay (the bearer token goes nowhere else).
func (a *API) UploadAttachment(ctx context.Context, cipher crypto.Cipher, sessionID, filename string, plaintext []byte) (string, error) {
	sealed, err := cipher.Seal(plaintext)
	if err != nil {
		return "", fmt.Errorf("relay: encrypt attachment %q: %w", filename, err)
	}
	if len(sealed) > MaxAttachmentBytes {
		return "", fmt.Errorf("relay: %q is %d bytes (%d encrypted); the relay takes at most %d bytes per attachment: %w",
			filename, len(plaintext), len(sealed), MaxAttachmentBytes, ErrAttachmentTooLarge)
	}
	path := "/v1/sessions/" + sessionID + "/attachments/request-upload"
	var up struct {
		Ref       string `json:"ref"`
		UploadURL string `json:"uploadUrl"`
		Method    string `json:"method"`
	}
	if err := a.do(ctx, http.MethodPost, path, nil, map[string]any{"filename": filename, "size": len(sealed)}, &up); err != nil {
		return "", tooLarge(err)
	}
	if up.Ref == "" || up.UploadURL == "" {
		return "", fmt.Errorf("relay: POST %s: answer without ref or uploadUrl: %w", path, ErrProtocol)
	}
	method := up.Method
	if method == "" {
		method = http.MethodPut
	}
	if err := a.raw(ctx, method, up.UploadURL, sealed, nil); err != nil {
		return "", tooLarge(err)
	}
	return up.Ref, nil
}

// DownloadAttachment fetches the blob ref of session sessionID (request-
// download {ref} → {downloadUrl}, then a GET) and decrypts it with cipher.
// Errors: ErrAttachmentNotFound, a crypto error (wrapped) for bytes that do
// not open with the session's key, *StatusError, ErrUnavailable.
func (a *API) DownloadAttachment(ctx context.Context, cipher crypto.Cipher, sessionID, ref string) ([]byte, error) {
	path := "/v1/sessions/" + sessionID + "/attachments/request-download"
	var down struct {
		DownloadURL string `json:"downloadUrl"`
	}
	if err := a.do(ctx, http.MethodPost, path, nil, map[string]any{"ref": ref}, &down); err != nil {
		return nil, notFound(ref, err)
	}
	if down.DownloadURL == "" {
		return nil, fmt.Errorf("relay: POST %s: answer without downloadUrl: %w", path, ErrProtocol)
	}
	var sealed []byte
	if err := a.raw(ctx, http.MethodGet, down.DownloadURL, nil, &sealed); err != nil {
		return nil, notFound(ref, err)
	}
	plain, err := cipher.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("relay: attachment %s does not decrypt with the session's key: %w", ref, err)
	}
	return plain, nil
}

// raw sends body to an absolute URL of this relay and reads the answer's
// bytes into out (when not nil), at most MaxAttachmentBytes+1 MiB.
func (a *API) raw(ctx context.Context, method, u string, body []byte, out *[]byte) error {
	if !strings.HasPrefix(u, a.base+"/") {
		return fmt.Errorf("relay: attachment URL %q is not on the relay %s: %w", u, a.base, ErrProtocol)
	}
	path := strings.TrimPrefix(u, a.base)
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("relay: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if a.client != "" {
		req.Header.Set("X-Happy-Client", a.client)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("relay: %s %s: %w: %v", method, path, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	const limit = MaxAttachmentBytes + 1<<20
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("relay: %s %s: read answer: %w: %v", method, path, ErrUnavailable, err)
	}
	if len(b) > limit {
		return fmt.Errorf("relay: %s %s: answer larger than %d bytes: %w", method, path, limit, ErrProtocol)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Method: method, Path: path, Status: resp.StatusCode, Message: errorText(b)}
	}
	if out != nil {
		*out = b
	}
	return nil
}

func tooLarge(err error) error {
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusRequestEntityTooLarge {
		return fmt.Errorf("%w: %w", err, ErrAttachmentTooLarge)
	}
	return err
}

func notFound(ref string, err error) error {
	var se *StatusError
	if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusBadRequest) {
		return fmt.Errorf("relay: attachment %s: %w: %w", ref, ErrAttachmentNotFound, err)
	}
	return err
}

// IsAttachmentRef reports whether a file part's URL is a relay blob
// reference ("sessions/<sid>/attachments/<file>"), not an inline data: URL
// or a link.
func IsAttachmentRef(u string) bool {
	rest, ok := strings.CutPrefix(u, "sessions/")
	if !ok {
		return false
	}
	sid, file, ok := strings.Cut(rest, "/attachments/")
	return ok && sid != "" && file != "" && !strings.Contains(sid, "/") && !strings.Contains(file, "/")
}
