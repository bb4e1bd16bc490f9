//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server/servertest"
)

// referenceSession stores, on a fresh relay, a session the way the
// reference CLI writes one: legacy-encrypted metadata without a summary
// and the rows of the refimport golden case `name` (its decrypted rows,
// sealed again), each under a random localId. It returns happy's
// environment logged into that account and the session id.
func referenceSession(t *testing.T, name string) (map[string]string, string) {
	t.Helper()
	r := servertest.Start(t)
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	creds, err := relay.CreateAccount(ctx, api, secret)
	if err != nil {
		t.Fatal(err)
	}
	h := t.TempDir()
	if err := creds.Save(filepath.Join(h, crypto.CredentialsFileName)); err != nil {
		t.Fatal(err)
	}
	api = api.WithToken(creds.Token)
	c := crypto.NewLegacyCipher(secret)
	seal := func(plain []byte) string {
		b, err := c.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		return crypto.EncodeBase64(b)
	}
	info, err := api.CreateSession(ctx, relay.SessionCreate{Tag: "ref-" + name, Metadata: seal([]byte(`{"path":"/home/dev/proj","host":"box","flavor":"claude","version":"1.2.5"}`))})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("..", "..", "session", "refimport", "testdata", "cases", name, "rows.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msgs []relay.OutgoingMessage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row struct {
			Plain json.RawMessage `json:"plain"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, relay.OutgoingMessage{Content: seal(row.Plain), LocalID: fmt.Sprintf("ref-%d", len(msgs))})
	}
	if _, err := api.SendMessages(ctx, info.ID, msgs); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"HAPPY_SERVER_URL": r.URL, "HAPPY_HOME_DIR": h, "PATH": agentFreePath()}, info.ID
}

// TestLogReferenceSession: happy log reads a session the reference CLI
// wrote (legacy rows only) as its importer projects it — prompts, answers,
// tools, its title from the first prompt — in the readable form, as the
// --json document and as --events, and says what it dropped.
func TestLogReferenceSession(t *testing.T) {
	env, sid := referenceSession(t, "agent-families")
	code, stdout, stderr := runHappy(t, env, "log", sid)
	if code != exitOK {
		t.Fatalf("log = %d: %s", code, stderr)
	}
	for _, want := range []string{"session " + sid + " — What is in go.mod?\n", "> What is in go.mod?\n", "● read go.mod — completed  [toolu_01]\n",
		"It declares module example.com/x.\n", "> Try gemini\n", "error: denied by policy\n", "warning: 3 input(s) were dropped"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("happy log lacks %q:\n%s", want, stdout)
		}
	}
	code, doc, stderr := runHappy(t, env, "log", sid, "--json")
	if code != exitOK || !strings.Contains(stderr, "3") {
		t.Fatalf("log --json = %d: %q", code, stderr)
	}
	var tr struct {
		Session struct {
			Title string `json:"title"`
		} `json:"session"`
		Messages []json.RawMessage `json:"messages"`
		Dropped  []struct {
			Reason string `json:"reason"`
			Kind   string `json:"kind"`
		} `json:"dropped"`
	}
	if err := json.Unmarshal([]byte(doc), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Session.Title != "What is in go.mod?" || len(tr.Messages) != 6 || len(tr.Dropped) != 3 || tr.Dropped[0].Kind != "agent/output/system" {
		t.Fatalf("document: title %q, %d messages, dropped %+v", tr.Session.Title, len(tr.Messages), tr.Dropped)
	}
	code, events, stderr := runHappy(t, env, "log", sid, "--events")
	if code != exitOK {
		t.Fatalf("log --events = %d: %s", code, stderr)
	}
	var texts []string
	sc := bufio.NewScanner(bytes.NewBufferString(events))
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "text" {
			texts = append(texts, ev.Text)
		}
	}
	if !strings.Contains(strings.Join(texts, "|"), "What is in go.mod?|Read the file.|Reading it.|It declares module example.com/x.|And with codex?") {
		t.Fatalf("--events texts: %q", texts)
	}
}
