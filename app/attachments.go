package app

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/media"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// MaxAttachmentSize is the largest file happy attaches, in bytes: the
// relay's limit on a blob (relay.MaxAttachmentBytes) less the larger
// cipher overhead, so a file that passes fits with either cipher.
const MaxAttachmentSize = relay.MaxAttachmentBytes - crypto.LegacyOverhead

// ErrAttachmentTooLarge is returned (wrapped, with the sizes) for a file
// over MaxAttachmentSize.
var ErrAttachmentTooLarge = fmt.Errorf("%w (at most %d bytes)", session.ErrAttachmentOversize, MaxAttachmentSize)

// Blob is one file stored as an encrypted blob: the file part that
// references it.
type Blob = agent.PromptFile

// UploadBlob checks data (media.Inspect against claimed, or the type of
// name's extension when claimed is "") and stores it as a blob of the
// relay session sessionID sealed with cipher. It returns the file part:
// the type of the bytes, name, the blob reference as URL, and a
// mapper.BlobSource. Errors: ErrAttachmentTooLarge, media.ErrMismatch,
// media.ErrBadImage, the relay's errors.
func UploadBlob(ctx context.Context, api *relay.API, cipher crypto.Cipher, sessionID, name, claimed string, data []byte) (Blob, error) {
	if len(data) > MaxAttachmentSize {
		return Blob{}, fmt.Errorf("%s is %d bytes: %w", name, len(data), ErrAttachmentTooLarge)
	}
	if claimed == "" {
		claimed = media.TypeByName(name)
	}
	info, err := media.Inspect(data, claimed)
	if err != nil {
		return Blob{}, fmt.Errorf("%s: %w", name, err)
	}
	ref, err := api.UploadAttachment(ctx, cipher, sessionID, name, data)
	if err != nil {
		if errors.Is(err, relay.ErrAttachmentTooLarge) {
			err = fmt.Errorf("%w: %w", err, session.ErrAttachmentOversize)
		}
		return Blob{}, err
	}
	src, _ := json.Marshal(mapper.BlobSource{Type: "blob", Size: int64(len(data)), SHA256: mapper.BlobDigest(data), Width: info.Width, Height: info.Height, Thumbhash: info.Thumbhash})
	return Blob{Mime: info.Mime, Filename: name, URL: ref, Source: src}, nil
}

// UploadFile reads the file at path (refused past MaxAttachmentSize before
// it is read) and stores it with UploadBlob under its base name.
func UploadFile(ctx context.Context, conn *Conn, o Opened, path string) (Blob, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Blob{}, err
	}
	if !st.Mode().IsRegular() {
		return Blob{}, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > MaxAttachmentSize {
		return Blob{}, fmt.Errorf("%s is %d bytes: %w", path, st.Size(), ErrAttachmentTooLarge)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Blob{}, err
	}
	return UploadBlob(ctx, conn.API, o.Cipher, o.Info.ID, filepath.Base(path), "", data)
}

// GetAttachment downloads and decrypts the blob ref of a session and
// checks it against the file part that references it (a prompt's file part
// or a tool's attachment, found by reading the transcript): its SHA-256, or
// its size for the reference app's files, opened with the key the part
// names. A blob no message references yet (a reference app file waiting
// for its text) is opened with the session's record cipher, else its blob
// key, and returned with checked false. Errors: not a reference, the
// relay's, crypto's, mapper.ErrBlobMismatch.
func GetAttachment(ctx context.Context, conn *Conn, o Opened, ref string) (data []byte, checked bool, err error) {
	if !relay.IsAttachmentRef(ref) {
		return nil, false, fmt.Errorf("%q is not an attachment reference (sessions/<id>/attachments/<file>)", ref)
	}
	rb, _, err := ReadTranscript(ctx, conn, o, ReadOptions{})
	if err != nil {
		return nil, false, err
	}
	part, ok := FindBlobPart(rb.Transcript(), ref)
	src, isBlob := mapper.ParseBlobSource(part.Source)
	if !ok || !isBlob {
		b, err := conn.API.DownloadAttachment(ctx, o.Cipher, o.Info.ID, ref)
		if err != nil && (errors.Is(err, crypto.ErrAuthFailed) || errors.Is(err, crypto.ErrUnsupportedVersion) || errors.Is(err, crypto.ErrTruncated)) {
			if bc, berr := crypto.BlobCipherOf(o.Cipher); berr == nil {
				if b2, err2 := conn.API.DownloadAttachment(ctx, bc, o.Info.ID, ref); err2 == nil {
					return b2, false, nil
				}
			}
		}
		return b, false, err
	}
	cipher := o.Cipher
	if src.Key == mapper.BlobKeyReference {
		if cipher, err = crypto.BlobCipherOf(cipher); err != nil {
			return nil, false, err
		}
	}
	b, err := conn.API.DownloadAttachment(ctx, cipher, o.Info.ID, ref)
	if err != nil {
		return nil, false, err
	}
	if err := src.Verify(b); err != nil {
		return nil, false, fmt.Errorf("%s (%s): %w", ref, part.Filename, err)
	}
	return b, true, nil
}

// FindBlobPart returns the file part of t that references the blob ref: a
// message's file part or a completed tool's attachment, in t's messages or
// its children's; the last one wins when several do.
func FindBlobPart(t mapper.Transcript, ref string) (mapper.FilePart, bool) {
	var found mapper.FilePart
	ok := false
	for _, m := range t.Messages {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case *mapper.FilePart:
				if p.URL == ref {
					found, ok = *p, true
				}
			case *mapper.ToolPart:
				for _, a := range p.State.Attachments {
					if a.URL == ref {
						found, ok = a, true
					}
				}
			}
		}
	}
	for _, c := range t.Children {
		if f, cok := FindBlobPart(c, ref); cok {
			found, ok = f, true
		}
	}
	return found, ok
}

// blobSession is what blobStore needs of a running relay session.
type blobSession interface {
	WaitCreated(ctx context.Context) (string, error)
	Cipher() crypto.Cipher
}

// blobStore is a running session's session.Attachments: blobs of its relay
// session, sealed with its cipher. Stored bytes are remembered by their
// SHA-256, so a replayed tool result references the same blob.
type blobStore struct {
	api  *relay.API
	sess blobSession
	mu   sync.Mutex
	done map[[32]byte]Blob
}

func newBlobStore(api *relay.API, sess blobSession) *blobStore {
	return &blobStore{api: api, sess: sess, done: map[[32]byte]Blob{}}
}

// Fetch implements session.Attachments. A blob whose source says
// mapper.BlobKeyReference opens with the session's blob key.
func (b *blobStore) Fetch(ctx context.Context, f agent.PromptFile) (agent.PromptFile, error) {
	if !relay.IsAttachmentRef(f.URL) {
		return f, nil
	}
	sid, err := b.sess.WaitCreated(ctx)
	if err != nil {
		return f, err
	}
	cipher := b.sess.Cipher()
	if src, ok := mapper.ParseBlobSource(f.Source); ok && src.Key == mapper.BlobKeyReference {
		// Sealed by the reference app, under the session's blob key.
		if cipher, err = crypto.BlobCipherOf(cipher); err != nil {
			return f, err
		}
	}
	data, err := b.api.DownloadAttachment(ctx, cipher, sid, f.URL)
	if err != nil {
		return f, err
	}
	if len(data) > MaxAttachmentSize {
		return f, fmt.Errorf("%d bytes: %w", len(data), ErrAttachmentTooLarge)
	}
	if src, ok := mapper.ParseBlobSource(f.Source); ok {
		if err := src.Verify(data); err != nil {
			return f, err
		}
	}
	claimed := f.Mime
	if claimed == "" {
		claimed = media.TypeByName(f.Filename)
	}
	info, err := media.Inspect(data, claimed)
	if err != nil {
		return f, err
	}
	out := f
	out.Mime = info.Mime
	out.URL = "data:" + info.Mime + ";base64," + base64.StdEncoding.EncodeToString(data)
	return out, nil
}

// Store implements session.Attachments.
func (b *blobStore) Store(ctx context.Context, f agent.PromptFile) (agent.PromptFile, error) {
	mime, data, err := decodeDataURL(f.URL)
	if err != nil {
		return f, err
	}
	if f.Mime != "" {
		mime = f.Mime
	}
	key := sha256.Sum256(data)
	b.mu.Lock()
	got, ok := b.done[key]
	b.mu.Unlock()
	if ok {
		return got, nil
	}
	sid, err := b.sess.WaitCreated(ctx)
	if err != nil {
		return f, err
	}
	name := f.Filename
	if name == "" {
		name = "attachment"
	}
	got, err = UploadBlob(ctx, b.api, b.sess.Cipher(), sid, name, mime, data)
	if err != nil {
		return f, err
	}
	got.Filename = f.Filename
	b.mu.Lock()
	b.done[key] = got
	b.mu.Unlock()
	return got, nil
}

// decodeDataURL reads data:[<mime>][;base64],<data> (RFC 2397).
func decodeDataURL(u string) (mime string, data []byte, err error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", nil, fmt.Errorf("not a data: URL")
	}
	head, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, fmt.Errorf("data: URL without a comma")
	}
	if m, isB64 := strings.CutSuffix(head, ";base64"); isB64 {
		data, err = base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return "", nil, fmt.Errorf("data: URL: %w", err)
		}
		return m, data, nil
	}
	s, err := url.PathUnescape(payload)
	if err != nil {
		return "", nil, fmt.Errorf("data: URL: %w", err)
	}
	m, _, _ := strings.Cut(head, ";")
	return m, []byte(s), nil
}
