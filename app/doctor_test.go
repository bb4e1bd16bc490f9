package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/webpushtest"
	"github.com/happy-dev/happy/relay/outbox"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/rs/zerolog"
)

// fakeExe writes an executable shell script named name into dir.
func fakeExe(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDoctor(t *testing.T) {
	env, conn, _ := twoDevices(t)
	dir := t.TempDir()
	okExe := fakeExe(t, dir, "good", "echo 'good 1.2.3'; echo second line")
	hangExe := fakeExe(t, dir, "hang", "sleep 30")
	failExe := fakeExe(t, dir, "bad", "echo broken >&2; exit 3")
	// Something waits for the relay in the outbox.
	if err := conn.Client.Outbox().Append(context.Background(), outbox.Entry{Session: "s1", Record: "r1", Version: 1, Content: "x"}); err != nil {
		t.Fatal(err)
	}
	// The relay once held another row under one of this outbox's localIds.
	if err := conn.Client.Outbox().NoteConflict(context.Background(), "s0", "r0.2", 7, "the row at seq 7 holds another ciphertext"); err != nil {
		t.Fatal(err)
	}
	// This machine's clock runs a minute fast.
	env.Now = func() time.Time { return time.Now().Add(time.Minute) }
	checks := Doctor(context.Background(), env, DoctorOptions{Timeout: 500 * time.Millisecond, Agents: []AgentProbe{
		{Name: "good", Path: okExe},
		{Name: "missing", Missing: `no "missing" on PATH`, Fix: "install it"},
		{Name: "hang", Path: hangExe},
		{Name: "bad", Path: failExe, Fix: "set HAPPY_BAD_PATH"},
	}})
	byName := map[string]Check{}
	var names []string
	for _, c := range checks {
		byName[c.Name] = c
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "agent good,agent missing,agent hang,agent bad,home,relay,clock,account,notifications,outbox,orphans,logs,platform" {
		t.Fatalf("checks in order %s", got)
	}
	want := []struct {
		name, status, detailHas, fixHas string
	}{
		{"agent good", CheckOK, "good 1.2.3 (" + okExe + ")", ""},
		{"agent missing", CheckWarn, `no "missing" on PATH`, "install it"},
		{"agent hang", CheckFail, "--version did not answer within 500ms", "run " + hangExe + " --version yourself"},
		{"agent bad", CheckFail, "exit status 3", "reinstall it, or set HAPPY_BAD_PATH"},
		{"relay", CheckOK, "(from env): happy-server", ""},
		{"clock", CheckWarn, "ahead of the relay", "sync the clock"},
		{"account", CheckOK, "0 session(s)", ""},
		{"notifications", CheckOK, "; Expo: off on the relay; Web Push: 0 browser(s)", "turn notifications on in Devices"},
		{"outbox", CheckWarn, "1 version(s) of 1 session(s) wait for the relay; 1 localId conflict(s) since ", "happy auth logout --revoke"},
		{"orphans", CheckOK, "no session left running", ""},
		{"platform", CheckOK, "", ""},
	}
	for _, w := range want {
		c := byName[w.name]
		if c.Status != w.status || !strings.Contains(c.Detail, w.detailHas) || !strings.Contains(c.Fix, w.fixHas) || (w.fixHas == "" && c.Fix != "") {
			t.Errorf("%s = %+v; want status %s, detail with %q, fix with %q", w.name, c, w.status, w.detailHas, w.fixHas)
		}
	}
	if d := byName["clock"].Detail; !strings.HasPrefix(d, "this machine is 1m0") {
		t.Errorf("clock detail %q, want about a minute", d)
	}
}

func TestDoctorLoggedOutAndNoRelay(t *testing.T) {
	env, _, _ := twoDevices(t)
	if err := os.Remove(env.Home.AccessKey()); err != nil {
		t.Fatal(err)
	}
	env.Getenv = func(k string) string {
		if k == "HAPPY_SERVER_URL" {
			return "http://127.0.0.1:1"
		}
		return ""
	}
	checks := Doctor(context.Background(), env, DoctorOptions{Timeout: time.Second})
	got := map[string]Check{}
	for _, c := range checks {
		got[c.Name] = c
	}
	if c := got["relay"]; c.Status != CheckFail || !strings.Contains(c.Detail, "http://127.0.0.1:1 (from env) does not answer") || !strings.Contains(c.Fix, "happy server") {
		t.Errorf("relay %+v", c)
	}
	if c := got["account"]; c.Status != CheckFail || !strings.HasPrefix(c.Detail, "not logged in") || !strings.Contains(c.Fix, "happy auth login") {
		t.Errorf("account %+v", c)
	}
	// Logged in, relay down: the account is not asked for.
	env2, _, _ := twoDevices(t)
	env2.Getenv = env.Getenv
	got2 := map[string]Check{}
	for _, c := range Doctor(context.Background(), env2, DoctorOptions{Timeout: time.Second}) {
		got2[c.Name] = c
	}
	if c := got2["account"]; c.Status != CheckWarn || !strings.Contains(c.Detail, "not checked with the relay") {
		t.Errorf("account with the relay down %+v", c)
	}
	if c := got["outbox"]; c.Status != CheckOK {
		t.Errorf("outbox %+v", c)
	}
	if _, ok := got["clock"]; ok {
		t.Error("a clock check without a relay")
	}
}

// A home that is not a folder is the one failure named, with its fix; the
// built-in relay that is not running is not started by the check.
func TestDoctorHomeAndBuiltInRelay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notes")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, _ := home.New(file)
	checks := Doctor(context.Background(), Env{Home: h, Getenv: func(string) string { return "" }, Log: zerolog.Nop()}, DoctorOptions{Timeout: time.Second})
	if len(checks) != 2 || checks[0].Name != "home" || checks[0].Status != CheckFail || !strings.Contains(checks[0].Fix, "HAPPY_HOME_DIR") || checks[1].Name != "platform" {
		t.Fatalf("checks %+v", checks)
	}
	h2, _ := home.New(t.TempDir())
	// The default relay address, on a port nothing listens on.
	env := Env{Home: h2, Getenv: func(string) string { return "" }, Log: zerolog.Nop()}
	if err := os.WriteFile(h2.Settings(), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got := map[string]Check{}
	for _, c := range Doctor(context.Background(), env, DoctorOptions{Timeout: time.Second}) {
		got[c.Name] = c
	}
	if c := got["relay"]; c.Status == CheckWarn {
		if !strings.Contains(c.Detail, "built-in relay") || !strings.Contains(c.Fix, "next agent run starts it") {
			t.Errorf("relay %+v", c)
		}
		if _, err := os.Stat(h2.Server()); err == nil {
			t.Error("the check started the built-in relay")
		}
	}
}

// A program on the built-in relay's address that cannot prove it is this
// home's relay fails the relay check, and the account is not checked with
// it (its token is not sent).
func TestDoctorRefusesASquatter(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	sq := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/health" {
			fmt.Fprint(w, `{"status":"ok","timestamp":1}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer sq.Close()
	h, _ := home.New(t.TempDir())
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	creds, err := crypto.NewAccountCredentials("token", [32]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Save(h.AccessKey()); err != nil {
		t.Fatal(err)
	}
	env := Env{Home: h, Getenv: func(k string) string { return map[string]string{"HAPPY_EMBEDDED_URL": sq.URL}[k] }, Log: zerolog.Nop()}
	got := map[string]Check{}
	for _, c := range Doctor(context.Background(), env, DoctorOptions{Timeout: 5 * time.Second}) {
		got[c.Name] = c
	}
	if c := got["relay"]; c.Status != CheckFail || !strings.Contains(c.Detail, "cannot prove it is this home's relay") || !strings.HasPrefix(c.Fix, "stop the program on "+sq.URL) {
		t.Errorf("relay check %+v", c)
	}
	if c := got["account"]; c.Status != CheckWarn || !strings.Contains(c.Detail, "not checked with the relay") {
		t.Errorf("account check %+v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(paths, ",") != "/health" {
		t.Errorf("the squatter got %v", paths)
	}
}

// TestDoctorNotifications: with an Expo token and a browser subscribed on
// a relay that sends Expo pushes, doctor counts both and suggests nothing.
func TestDoctorNotifications(t *testing.T) {
	ps := webpushtest.Start(t)
	r := servertest.StartConfig(t, server.Config{ExpoPushURL: "http://127.0.0.1:1/never-called", WebPushServices: []string{"127.0.0.1"}})
	env, conn, _ := twoDevicesOn(t, r)
	p256dh, auth := ps.Keys()
	for path, body := range map[string]any{
		"/v1/push-tokens":            map[string]any{"token": "ExponentPushToken[phone]"},
		"/v1/web-push/subscriptions": map[string]any{"endpoint": ps.URL + "/sub/1", "keys": map[string]any{"p256dh": p256dh, "auth": auth}},
	} {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, r.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+conn.Creds.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	for _, c := range Doctor(context.Background(), env, DoctorOptions{Timeout: 5 * time.Second}) {
		if c.Name != "notifications" {
			continue
		}
		if c.Status != CheckOK || !strings.HasPrefix(c.Detail, "desktop: ") || !strings.HasSuffix(c.Detail, "; Expo: 1 app token(s); Web Push: 1 browser(s)") || c.Fix != "" {
			t.Fatalf("notifications = %+v", c)
		}
		return
	}
	t.Fatal("no notifications check")
}

// TestDoctorReferenceRelayHealth: the reference relay answers /health with
// its time as an ISO-8601 string; doctor takes it as a relay's health and
// measures the clock skew from it as from our relay's milliseconds.
func TestDoctorReferenceRelayHealth(t *testing.T) {
	relayNow := time.Date(2026, 3, 4, 5, 6, 7, 890*int(time.Millisecond), time.UTC)
	for _, tc := range []struct {
		name, body            string
		relayStatus, clockHas string
		clockStatus           string
	}{
		{"iso", `{"status":"ok","timestamp":"` + relayNow.Format("2006-01-02T15:04:05.000Z") + `","service":"happy-server"}`, CheckOK, "this machine is 1m0s ahead of the relay", CheckWarn},
		{"millis", fmt.Sprintf(`{"status":"ok","timestamp":%d,"service":"happy-server"}`, relayNow.UnixMilli()), CheckOK, "this machine is 1m0s ahead of the relay", CheckWarn},
		{"no time", `{"status":"ok","service":"happy-server"}`, CheckOK, "the relay gave no time", CheckWarn},
		{"bad time", `{"status":"ok","timestamp":"yesterday","service":"happy-server"}`, CheckFail, "", ""},
		{"not ok", `{"status":"down","timestamp":"` + relayNow.Format(time.RFC3339Nano) + `"}`, CheckFail, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, tc.body)
					return
				}
				http.NotFound(w, r)
			}))
			defer stub.Close()
			env, _, _ := twoDevices(t)
			env.Getenv = func(k string) string { return map[string]string{"HAPPY_SERVER_URL": stub.URL}[k] }
			env.Now = func() time.Time { return relayNow.Add(time.Minute) }
			got := map[string]Check{}
			for _, c := range Doctor(context.Background(), env, DoctorOptions{Timeout: 5 * time.Second}) {
				got[c.Name] = c
			}
			c := got["relay"]
			if c.Status != tc.relayStatus {
				t.Fatalf("relay %+v, want %s", c, tc.relayStatus)
			}
			if tc.relayStatus == CheckFail {
				if !strings.Contains(c.Detail, "not a relay's health") {
					t.Errorf("relay detail %q", c.Detail)
				}
				if _, ok := got["clock"]; ok {
					t.Errorf("a clock check from a refused health: %+v", got["clock"])
				}
				return
			}
			if want := stub.URL + " (from env): happy-server"; c.Detail != want {
				t.Errorf("relay detail %q, want %q", c.Detail, want)
			}
			if cl := got["clock"]; cl.Status != tc.clockStatus || !strings.HasPrefix(cl.Detail, tc.clockHas) {
				t.Errorf("clock %+v, want %s starting %q", cl, tc.clockStatus, tc.clockHas)
			}
		})
	}
}
