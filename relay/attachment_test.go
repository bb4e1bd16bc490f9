package relay

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/server/servertest"
)

func TestAttachmentRoundTrip(t *testing.T) {
	r := servertest.Start(t)
	api := followAPI(t, r.URL, r.URL)
	sid := followSession(t, api)
	var key [32]byte
	key[0] = 7
	cipher := crypto.NewDataKeyCipher(key)
	plain := bytes.Repeat([]byte("the plaintext of a secret attachment "), 100)

	ref, err := api.UploadAttachment(t.Context(), cipher, sid, "notes.txt", plain)
	if err != nil {
		t.Fatal(err)
	}
	if want := "sessions/" + sid + "/attachments/"; !strings.HasPrefix(ref, want) || !strings.HasSuffix(ref, ".enc") {
		t.Fatalf("ref = %q, want %s<uuid>.enc", ref, want)
	}
	got, err := api.DownloadAttachment(t.Context(), cipher, sid, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatalf("downloaded %d bytes, want the %d uploaded", len(got), len(plain))
	}

	// The relay stores ciphertext only: no stored file holds the plaintext
	// or a piece of it.
	found := 0
	_ = filepath.WalkDir(filepath.Join(r.DataDir, "attachments"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		found++
		if bytes.Contains(b, []byte("secret attachment")) {
			t.Errorf("%s holds the plaintext", p)
		}
		if len(b) != len(plain)+crypto.DataKeyOverhead {
			t.Errorf("%s is %d bytes, want %d (sealed)", p, len(b), len(plain)+crypto.DataKeyOverhead)
		}
		return nil
	})
	want := 1
	if os.Getenv(servertest.EnvStore) == "postgres" {
		want = 0 // PostgreSQL keeps attachments in the database, not in files
	}
	if found != want {
		t.Errorf("%d stored attachment files, want %d", found, want)
	}

	// Another key cannot open it.
	var other [32]byte
	if _, err := api.DownloadAttachment(t.Context(), crypto.NewDataKeyCipher(other), sid, ref); !errors.Is(err, crypto.ErrAuthFailed) {
		t.Errorf("download with another key = %v, want ErrAuthFailed", err)
	}
}

func TestAttachmentErrors(t *testing.T) {
	r := servertest.Start(t)
	api := followAPI(t, r.URL, r.URL)
	sid := followSession(t, api)
	cipher := crypto.NewDataKeyCipher([32]byte{1})

	big := make([]byte, MaxAttachmentBytes-crypto.DataKeyOverhead+1)
	if _, err := api.UploadAttachment(t.Context(), cipher, sid, "big.bin", big); !errors.Is(err, ErrAttachmentTooLarge) {
		t.Errorf("upload of %d bytes = %v, want ErrAttachmentTooLarge", len(big), err)
	}
	fits := big[:len(big)-1]
	if _, err := api.UploadAttachment(t.Context(), cipher, sid, "fits.bin", fits); err != nil {
		t.Errorf("upload of %d bytes (the limit, sealed): %v", len(fits), err)
	}

	missing := "sessions/" + sid + "/attachments/00000000-0000-0000-0000-000000000000.enc"
	if _, err := api.DownloadAttachment(t.Context(), cipher, sid, missing); !errors.Is(err, ErrAttachmentNotFound) {
		t.Errorf("download of a missing blob = %v, want ErrAttachmentNotFound", err)
	}
	if _, err := api.DownloadAttachment(t.Context(), cipher, sid, "sessions/other/attachments/x.enc"); !errors.Is(err, ErrAttachmentNotFound) {
		t.Errorf("download of another session's ref = %v, want ErrAttachmentNotFound", err)
	}
}
