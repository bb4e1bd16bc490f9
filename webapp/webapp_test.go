package webapp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/browsertest"
	"github.com/happy-dev/happy/internal/thumbhash"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
	"github.com/happy-dev/happy/webapp"
)

// TestMain checks that no test leaves a goroutine behind. IgnoreCurrent:
// the Socket.IO engine client (linked in by the relay tests) starts a
// network monitor at package init that never stops; the library's own
// timers (ping timeouts, reconnect delays) end when they fire or are
// cleared and may outlive the last test by seconds.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/zishang520/socket.io/v3/pkg/utils.SetTimeout.func1"))
}

// The embedded app holds what index.html loads, and each vendored library
// has its license beside it.
func TestFiles(t *testing.T) {
	app := webapp.Files()
	index, err := fs.ReadFile(app, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"app.css", "lib/tweetnacl-1.0.3/nacl-fast.min.js", "lib/socket.io-4.8.1/socket.io.min.js", "js/main.js"} {
		if !strings.Contains(string(index), `"`+ref+`"`) {
			t.Errorf("index.html does not load %s", ref)
		}
		if _, err := fs.Stat(app, ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
	for _, lib := range []string{"lib/tweetnacl-1.0.3", "lib/socket.io-4.8.1"} {
		if _, err := fs.Stat(app, lib+"/LICENSE"); err != nil {
			t.Errorf("%s has no LICENSE: %v", lib, err)
		}
	}
	// No file of the app names another origin to load from.
	err = fs.WalkDir(app, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(p, "lib/") {
			return err
		}
		b, _ := fs.ReadFile(app, p)
		for _, bad := range []string{"<script src=\"http", "@import url(http", "fonts.googleapis", "cdn."} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s refers to an external resource (%q)", p, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fixtures are values Go's crypto package writes now, for the page to open.
func fixtures(t *testing.T) []byte {
	t.Helper()
	var acct, terminal, sessKey [32]byte
	for _, k := range []*[32]byte{&acct, &terminal, &sessKey} {
		if _, err := rand.Read(k[:]); err != nil {
			t.Fatal(err)
		}
	}
	terminalPub := crypto.BoxPublicKey(terminal)
	contentPub, _ := crypto.ContentKeyPair(acct)
	legacy, err := crypto.SealPairingResponse(crypto.PairingResponse{Variant: crypto.VariantLegacy, Secret: acct}, terminalPub)
	if err != nil {
		t.Fatal(err)
	}
	dk, err := crypto.SealPairingResponse(crypto.PairingResponse{Variant: crypto.VariantDataKey, ContentPublicKey: contentPub}, terminalPub)
	if err != nil {
		t.Fatal(err)
	}
	sealedToken, err := crypto.SealToken("eyJhbGciOiJFZERTQSJ9.e30.c2ln", terminalPub)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := crypto.WrapDataKey(sessKey, contentPub)
	if err != nil {
		t.Fatal(err)
	}
	plain := `{"kind":"message","version":2,"info":{"id":"msg_1","sessionID":"ses_1","role":"user","time":{"created":1}},"parts":[{"id":"prt_1","type":"text","text":"héllo 🌍"}]}`
	seal := func(c crypto.Cipher) string {
		b, err := c.Seal([]byte(plain))
		if err != nil {
			t.Fatal(err)
		}
		return crypto.EncodeBase64(b)
	}
	rows := []map[string]any{
		{"variant": "legacy", "dataEncryptionKey": nil, "plaintext": plain, "content": seal(crypto.NewLegacyCipher(acct))},
		{"variant": "dataKey", "dataEncryptionKey": crypto.EncodeBase64(wrapped), "plaintext": plain, "content": seal(crypto.NewDataKeyCipher(sessKey))},
	}
	detail := relay.PushDetail{HappyPush: 1, Kind: "permission", SessionID: "sess-1", Title: "Fix the login bug", CallID: "call-7", Tool: "bash", Summary: "rm -rf build", Time: 1760000000000}
	dj, _ := json.Marshal(detail)
	sealDetail := func(c crypto.Cipher) string {
		b, err := c.Seal(dj)
		if err != nil {
			t.Fatal(err)
		}
		return crypto.EncodeBase64(b)
	}
	push := map[string]any{"dataEncryptionKey": crypto.EncodeBase64(wrapped), "sealed": sealDetail(crypto.NewDataKeyCipher(sessKey)),
		"legacySealed": sealDetail(crypto.NewLegacyCipher(acct)), "detail": detail}
	b, err := json.Marshal(map[string]any{
		"push":           push,
		"pairingCodes":   pairingCodeFixtures(t, terminalPub),
		"parseCodes":     parseCodeFixtures(),
		"sealFixed":      sealFixedFixtures(t, acct, contentPub, terminalPub),
		"machines":       machineFixtures(t, acct),
		"terminalCode":   crypto.PairingCode(terminalPub),
		"terminalFull":   crypto.FullPairingCode(terminalPub, fixedPairingSecret),
		"pairingSecret":  fixedPairingSecret,
		"proofVector":    proofVector(),
		"accountSecret":  crypto.EncodeBase64(acct[:]),
		"terminalSecret": crypto.EncodeBase64(terminal[:]),
		"terminalPublic": crypto.EncodeBase64(terminalPub[:]),
		"contentPublic":  crypto.EncodeBase64(contentPub[:]),
		"pairingLegacy":  crypto.EncodeBase64(legacy),
		"pairingDataKey": crypto.EncodeBase64(dk),
		"sealedToken":    crypto.EncodeBase64(sealedToken),
		"backupKey":      crypto.FormatBackupKey(acct),
		"rows":           rows,
		"thumbhash":      thumbhashFixtures(t),
		"blobs":          blobFixtures(t, acct, sessKey, wrapped),
		"titles":         titleFixtures(t),
		"refimport":      refimportFixtures(t),
		"states":         stateFixtures(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// titleFixtures are session metadata with the title `happy sessions`
// shows for each (app.Opened.Title), for the page's sessionTitle.
func titleFixtures(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, md := range []string{
		`{"path":"/home/u/project","summary":{"text":"fix the login page","updatedAt":1}}`,
		`{"path":"/home/u/project"}`,
		`{"path":"/home/u/project/"}`,
		`{"path":"/home/u/project","summary":{"text":" \t\u0085\u00a0\u3000 ","updatedAt":1}}`,
		`{"path":"/home/u/project","summary":{"text":"\ufeff","updatedAt":1}}`,
		`{"path":"/home/u/project","summary":{"text":"  padded  ","updatedAt":1}}`,
		`{"path":"/"}`,
		`{"path":"//"}`,
		`{"path":"relative/dir"}`,
		`{"path":"plain"}`,
		`{"path":""}`,
		`{}`,
		`{"summary":{"text":""}}`,
	} {
		var m app.Metadata
		if err := json.Unmarshal([]byte(md), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]any{"metadata": json.RawMessage(md), "want": app.Opened{Metadata: m}.Title()})
	}
	return out
}

// stateFixtures are sessions (relay fields and metadata) with the state
// `happy sessions` shows for each at now (app.State), for the page's
// lifecycleState.
func stateFixtures(t *testing.T) []map[string]any {
	t.Helper()
	const now = int64(10_000_000)
	var out []map[string]any
	for _, c := range []struct {
		info relay.SessionInfo
		md   string
	}{
		{relay.SessionInfo{ActiveAt: now - 1000}, `{"lifecycleState":"running"}`},
		{relay.SessionInfo{ActiveAt: now - 1000}, `{}`},
		{relay.SessionInfo{ActiveAt: now - 90_000}, `{"lifecycleState":"running"}`},
		{relay.SessionInfo{ActiveAt: now - 90_001}, `{"lifecycleState":"running"}`},
		{relay.SessionInfo{ActiveAt: now - 90_001}, `{"lifecycleState":"running","lifecycleStateSince":9999000}`},
		{relay.SessionInfo{CreatedAt: now - 5}, `{}`},
		{relay.SessionInfo{ActiveAt: now}, `{"lifecycleState":"ended"}`},
		{relay.SessionInfo{ActiveAt: 0}, `{"lifecycleState":"archived"}`},
		{relay.SessionInfo{ActiveAt: now}, `{"lifecycleState":"paused"}`},
	} {
		var m app.Metadata
		if err := json.Unmarshal([]byte(c.md), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]any{"info": map[string]int64{"activeAt": c.info.ActiveAt, "createdAt": c.info.CreatedAt}, "metadata": json.RawMessage(c.md),
			"now": now, "want": app.State(c.info, m, time.UnixMilli(now))})
	}
	return out
}

// pairingCodeFixtures are keys with their crypto.PairingCode: fixed ones
// (all zero, all 0xff, 0..31) and random ones.
func pairingCodeFixtures(t *testing.T, more ...[32]byte) []map[string]string {
	t.Helper()
	var keys [][32]byte
	var zero, ff, seq [32]byte
	for i := range ff {
		ff[i], seq[i] = 0xff, byte(i)
	}
	keys = append(keys, zero, ff, seq)
	keys = append(keys, more...)
	for range 5 {
		var k [32]byte
		if _, err := rand.Read(k[:]); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	out := make([]map[string]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, map[string]string{"publicKey": crypto.EncodeBase64(k[:]), "code": crypto.PairingCode(k)})
	}
	return out
}

// parseCodeFixtures are typed codes with what crypto.ParsePairingCode makes
// of them: the normal form, or the reason of its refusal.
func parseCodeFixtures() []map[string]string {
	var out []map[string]string
	for _, in := range []string{"ABCDE-FGHIJ", "abcde fghij", " aB cD-eF gH iJ ", "0I8AA-22222", "abcdefghij", "ABCDE-FGHI", "ABCDE-FGHIJK", "ABCDE-FGH!J", "ABCDE-FGH9J", "", "-----"} {
		got, err := crypto.ParsePairingCode(in)
		row := map[string]string{"in": in, "out": got}
		switch {
		case errors.Is(err, crypto.ErrBadLength):
			row["reason"] = "bad_length"
		case errors.Is(err, crypto.ErrBadEncoding):
			row["reason"] = "bad_encoding"
		case err != nil:
			row["reason"] = err.Error()
		}
		out = append(out, row)
	}
	return out
}

// sealFixedFixtures are pairing responses crypto.SealPairingResponse seals
// with a pinned ephemeral key and nonce, for the page to reproduce byte for
// byte.
func sealFixedFixtures(t *testing.T, acct, contentPub, terminalPub [32]byte) map[string]string {
	t.Helper()
	rnd := make([]byte, 56)
	if _, err := rand.Read(rnd); err != nil {
		t.Fatal(err)
	}
	seal := func(r crypto.PairingResponse) string {
		b, err := crypto.SealPairingResponse(r, terminalPub, crypto.WithRandom(bytes.NewReader(rnd)))
		if err != nil {
			t.Fatal(err)
		}
		return crypto.EncodeBase64(b)
	}
	prove := func(r crypto.PairingResponse) crypto.PairingResponse {
		p, err := crypto.ProvePairingResponse(r, fixedPairingSecret, terminalPub)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	legacy := crypto.PairingResponse{Variant: crypto.VariantLegacy, Secret: acct}
	dataKey := crypto.PairingResponse{Variant: crypto.VariantDataKey, ContentPublicKey: contentPub}
	return map[string]string{
		"ephemeralSecret": crypto.EncodeBase64(rnd[:32]),
		"nonce":           crypto.EncodeBase64(rnd[32:]),
		"legacy":          seal(legacy),
		"dataKey":         seal(dataKey),
		"legacyProven":    seal(prove(legacy)),
		"dataKeyProven":   seal(prove(dataKey)),
	}
}

// fixedPairingSecret is the terminal's pairing secret in the fixtures.
const fixedPairingSecret = "QWERT-YUIOP"

// proofVector is one crypto.PairingProof with its inputs, for the page's
// pairingProof to reproduce.
func proofVector() map[string]string {
	var key [32]byte
	for i := range key {
		key[i] = byte(i * 7)
	}
	body := append([]byte{1}, bytes.Repeat([]byte{0xab}, 32)...)
	proof := crypto.PairingProof("ABCDE-FGHIJ", key, body)
	return map[string]string{"secret": "abcde fghij", "publicKey": crypto.EncodeBase64(key[:]), "body": crypto.EncodeBase64(body), "proof": crypto.EncodeBase64(proof[:])}
}

// machineFixtures are GET /v1/machines entries as a daemon writes them:
// metadata and daemon state sealed with a dataKey machine key (wrapped for
// the account's content key), the same after its daemon stopped (offline
// though its last heartbeat is fresh), with the account secret (legacy),
// and one that does not decrypt; want is what the page must read from
// each.
func machineFixtures(t *testing.T, acct [32]byte) []map[string]any {
	t.Helper()
	creds, err := crypto.NewAccountCredentials("token", acct)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := creds.MachineEncryption()
	if err != nil {
		t.Fatal(err)
	}
	seal := func(c crypto.Cipher, v string) string {
		b, err := c.Seal([]byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return crypto.EncodeBase64(b)
	}
	md := `{"host":"box","platform":"linux","happyCliVersion":"1.2.3","homeDir":"/home/u","agents":[{"name":"claude","installed":true,"path":"/bin/claude"},{"name":"codex","installed":false,"error":"not found"},{"name":"gemini","installed":true}]}`
	ds := `{"status":"running","pid":42,"startedAt":1000,"sessions":[{"sessionId":"s1"}]}`
	legacy := crypto.NewLegacyCipher(acct)
	other := crypto.NewLegacyCipher([32]byte{1})
	return []map[string]any{
		{"info": map[string]any{"id": "m-dk", "metadata": seal(enc.Cipher, md), "daemonState": seal(enc.Cipher, ds), "dataEncryptionKey": *enc.DataEncryptionKeyBase64(), "active": true, "activeAt": 1_000_000},
			"now":  1_030_000,
			"want": map[string]any{"id": "m-dk", "host": "box", "platform": "linux", "version": "1.2.3", "online": true, "agents": []string{"claude", "gemini"}, "daemonStatus": "running", "error": ""}},
		{"info": map[string]any{"id": "m-stopped", "metadata": seal(enc.Cipher, md), "daemonState": seal(enc.Cipher, `{"status":"offline","pid":42,"startedAt":1000,"sessions":[],"shutdownRequestedAt":1020000,"shutdownSource":"signal"}`), "dataEncryptionKey": *enc.DataEncryptionKeyBase64(), "active": true, "activeAt": 1_000_000},
			"now":  1_030_000,
			"want": map[string]any{"id": "m-stopped", "host": "box", "platform": "linux", "version": "1.2.3", "online": false, "agents": []string{"claude", "gemini"}, "daemonStatus": "offline", "error": ""}},
		{"info": map[string]any{"id": "m-legacy", "metadata": seal(legacy, `{"host":"old","platform":"darwin","cliAvailability":{"claude":true,"codex":false,"detectedAt":5}}`), "daemonState": nil, "dataEncryptionKey": nil, "active": true, "activeAt": 1_000_000},
			"now":  1_100_000,
			"want": map[string]any{"id": "m-legacy", "host": "old", "platform": "darwin", "version": "", "online": false, "agents": []string{"claude"}, "daemonStatus": nil, "error": ""}},
		{"info": map[string]any{"id": "m-other", "metadata": seal(other, md), "dataEncryptionKey": nil, "active": false, "activeAt": 5},
			"now":  10,
			"want": map[string]any{"id": "m-other", "host": "", "platform": "", "version": "", "online": false, "agents": []string{}, "daemonStatus": nil, "error": "metadata: legacy bundle: authentication failed"}},
	}
}

// thumbhashFixtures are images hashed by internal/thumbhash (Encode) and
// their hashes rendered back (Decode), for the page's thumbhash.js to
// reproduce: each case's RGBA input, hash and decoded pixels.
func thumbhashFixtures(t *testing.T) []map[string]any {
	t.Helper()
	pattern := func(kind string, w, h int) []byte {
		out := make([]byte, w*h*4)
		for y := range h {
			for x := range w {
				i := (y*w + x) * 4
				switch kind {
				case "solid":
					copy(out[i:], []byte{200, 30, 90, 255})
				case "gradient":
					copy(out[i:], []byte{byte(x * 255 / max(1, w-1)), byte(y * 255 / max(1, h-1)), 128, 255})
				case "alpha":
					copy(out[i:], []byte{byte(x * 7), byte(y * 13), byte(x + y), byte((x * y) % 256)})
				}
			}
		}
		return out
	}
	var out []map[string]any
	for _, c := range []struct {
		kind string
		w, h int
	}{{"solid", 1, 1}, {"gradient", 100, 75}, {"gradient", 30, 100}, {"alpha", 50, 80}, {"alpha", 100, 100}} {
		rgba := pattern(c.kind, c.w, c.h)
		hash, err := thumbhash.Encode(c.w, c.h, rgba)
		if err != nil {
			t.Fatal(err)
		}
		dw, dh, dec, err := thumbhash.Decode(hash)
		if err != nil {
			t.Fatal(err)
		}
		ratio, _ := thumbhash.AspectRatio(hash)
		out = append(out, map[string]any{"kind": c.kind, "w": c.w, "h": c.h, "rgba": crypto.EncodeBase64(rgba), "hash": crypto.EncodeBase64(hash),
			"ratio": ratio, "decoded": map[string]any{"w": dw, "h": dh, "rgba": crypto.EncodeBase64(dec)}})
	}
	return out
}

// blobFixtures are attachment bytes sealed by Go: with the session's
// record cipher (happy's own blobs) and with crypto.BlobCipherOf (the
// reference app's), for a dataKey and a legacy session.
func blobFixtures(t *testing.T, acct, sessKey [32]byte, wrapped []byte) []map[string]any {
	t.Helper()
	plain := []byte("\x89PNG\r\n\x1a\n not really")
	var out []map[string]any
	for _, c := range []struct {
		variant string
		dek     any
		record  crypto.Cipher
	}{{"dataKey", crypto.EncodeBase64(wrapped), crypto.NewDataKeyCipher(sessKey)}, {"legacy", nil, crypto.NewLegacyCipher(acct)}} {
		bc, err := crypto.BlobCipherOf(c.record)
		if err != nil {
			t.Fatal(err)
		}
		own, err := c.record.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := bc.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]any{"variant": c.variant, "dataEncryptionKey": c.dek, "plain": crypto.EncodeBase64(plain),
			"own": crypto.EncodeBase64(own), "reference": crypto.EncodeBase64(ref)})
	}
	return out
}

// jsCSP is the policy the test page runs under: the app's own (scripts and
// styles from the origin only, no inline code, no eval).
const jsCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'"

// TestJS runs webapp/testdata/tests.js (the app's logic: crypto against the
// CLI's vectors and Go's own output, record reduction, Markdown, rendering
// of every part type and tool state, controls) in headless Chromium.
func TestJS(t *testing.T) {
	vectors, err := os.ReadFile("../crypto/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	fx := fixtures(t)
	mux := http.NewServeMux()
	mux.Handle("/app/", http.StripPrefix("/app/", http.FileServerFS(webapp.Files())))
	mux.Handle("/test/", http.StripPrefix("/test/", http.FileServerFS(os.DirFS("testdata"))))
	thVectors, err := os.ReadFile("../internal/thumbhash/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	mux.HandleFunc("/vectors.json", func(w http.ResponseWriter, _ *http.Request) { w.Write(vectors) })
	mux.HandleFunc("/thumbhash-vectors.json", func(w http.ResponseWriter, _ *http.Request) { w.Write(thVectors) })
	mux.HandleFunc("/fixtures.json", func(w http.ResponseWriter, _ *http.Request) { w.Write(fx) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", jsCSP)
		w.Header().Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })

	ctx := browsertest.Start(t)
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	var mu sync.Mutex
	var problems []string
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for ev, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if ev.Type == chromedp.ConsoleError {
				mu.Lock()
				problems = append(problems, "console error: "+ev.Text)
				mu.Unlock()
			}
		}
	}()
	defer func() { cancel(); <-consoleDone }()
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+l.Addr().String()+"/test/index.html")); err != nil {
		t.Fatal(err)
	}
	type failure struct{ Name, Message string }
	var res struct {
		Done          bool
		Passed, Total int
		Failures      []failure
	}
	raw, err := chromedp.Run(ctx, chromedp.Poll[json.RawMessage]("window.__results", chromedp.WithPollingTimeout(40*time.Second)))
	if err != nil {
		var boot string
		if b, e := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText")); e == nil {
			boot = b
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the test page did not finish: %v (page: %q, %s)", err, boot, strings.Join(problems, "; "))
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("results %s: %v", raw, err)
	}
	for _, f := range res.Failures {
		t.Errorf("%s: %s", f.Name, f.Message)
	}
	if res.Total < 20 || res.Passed+len(res.Failures) != res.Total {
		t.Errorf("ran %d of %d JS tests (%d passed); want at least 20", res.Passed+len(res.Failures), res.Total, res.Passed)
	}
	t.Logf("%d/%d JS tests passed", res.Passed, res.Total)
}

// maxBundleGzip is the app's size budget: every file it ships, each
// gzipped on its own (as the server sends them), at most 300 KB together.
const maxBundleGzip = 300 << 10

func TestBundleSize(t *testing.T) {
	app := webapp.Files()
	total, files := 0, 0
	err := fs.WalkDir(app, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(app, p)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		total += buf.Len()
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > maxBundleGzip {
		t.Errorf("the app is %d bytes gzipped (%d files), over the budget of %d", total, files, maxBundleGzip)
	}
	t.Logf("the app is %d bytes gzipped in %d files", total, files)
}

// refimportFixtures are the importer's golden cases (reference sessions'
// rows and agentState) with the transcript the CLI reads from them
// (session.Readback, as happy log does), for the page's Reducer to project
// the same.
func refimportFixtures(t *testing.T) []map[string]any {
	t.Helper()
	dir := filepath.Join("..", "session", "refimport", "testdata", "cases")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := mapper.Session{ID: "relay-ref-1", Directory: "/home/dev/proj", Time: mapper.SessionTime{Created: 1, Updated: 2}}
	var out []map[string]any
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "rows.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		rb := session.NewReadback(root)
		var state json.RawMessage = []byte("null")
		if st, err := os.ReadFile(filepath.Join(dir, e.Name(), "agentstate.json")); err == nil {
			rb.SetAgentState(st)
			state = st
		}
		var rows []map[string]any
		for _, line := range bytes.Split(raw, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var r struct {
				Seq     int64           `json:"seq"`
				LocalID string          `json:"localId"`
				Plain   json.RawMessage `json:"plain"`
			}
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatal(err)
			}
			rb.Add(r.Seq, r.LocalID, r.Plain)
			rows = append(rows, map[string]any{"seq": r.Seq, "localId": r.LocalID, "text": string(r.Plain)})
		}
		doc, err := mapper.EncodeTranscript(rb.Transcript())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]any{"name": e.Name(), "root": root, "rows": rows, "agentState": state, "want": json.RawMessage(doc)})
	}
	return out
}
