package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/backend"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
	"github.com/happy-dev/happy/server/store/storetest"
)

func openSpec(t *testing.T, name string) backend.Store {
	t.Helper()
	spec, err := backend.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := backend.Open(context.Background(), spec, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// happy server migrate applies the schema of the data folder's SQLite file
// once, then reports it up to date.
func TestServerMigrateSQLite(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HAPPY_HOME_DIR": home}
	db := filepath.Join(home, "server", "happy.db")
	code, stdout, stderr := runHappy(t, env, "server", "migrate")
	if code != exitOK || stdout != "sqlite:"+db+": applied 0001_init.sql\n"+"sqlite:"+db+": applied 0002_token_revocations.sql\n"+"sqlite:"+db+": applied 0003_auth_challenges.sql\n"+"sqlite:"+db+": applied 0004_web_push.sql\n" || stderr != "" {
		t.Fatalf("first migrate = (%d, %q, %q)", code, stdout, stderr)
	}
	code, stdout, stderr = runHappy(t, env, "server", "migrate", "--data", filepath.Join(home, "server"))
	if code != exitOK || stdout != "sqlite:"+db+": schema up to date (4 migrations)\n" || stderr != "" {
		t.Fatalf("second migrate = (%d, %q, %q)", code, stdout, stderr)
	}
}

func TestServerMigratePostgres(t *testing.T) {
	u := pgtest.URL(t)
	code, stdout, stderr := runHappy(t, nil, "server", "migrate", "--db", u)
	if code != exitOK || stdout != u+": applied 0001_init.sql\n"+u+": applied 0002_token_revocations.sql\n"+u+": applied 0003_auth_challenges.sql\n"+u+": applied 0004_web_push.sql\n" || stderr != "" {
		t.Fatalf("first migrate = (%d, %q, %q)", code, stdout, stderr)
	}
	code, stdout, _ = runHappy(t, nil, "server", "migrate", "--db", u)
	if code != exitOK || stdout != u+": schema up to date (4 migrations)\n" {
		t.Fatalf("second migrate = (%d, %q)", code, stdout)
	}
}

// happy server migrate --from sqlite:DIR --to postgres://… copies a relay's
// data and verifies it; a second copy is refused unless --replace.
func TestServerMigrateCopy(t *testing.T) {
	data := t.TempDir()
	src := openSpec(t, "sqlite:"+data)
	storetest.Fill(t, src)
	want := storetest.Dump(t, src)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	u := pgtest.URL(t)
	code, stdout, stderr := runHappy(t, nil, "server", "migrate", "--from", "sqlite:"+data, "--to", u)
	if code != exitOK || stderr != "" {
		t.Fatalf("copy = (%d, %q, %q)", code, stdout, stderr)
	}
	var lines []string
	for _, tb := range store.Tables {
		lines = append(lines, tb.Name+" "+strconv.Itoa(len(want[tb.Name])))
	}
	got := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(got) != len(lines)+2 || got[0] != "copied sqlite:"+filepath.Join(data, "happy.db")+" to "+u+":" || got[len(got)-1] != "verified: every table holds the same rows in both" {
		t.Fatalf("copy output:\n%s", stdout)
	}
	for i, l := range lines {
		if strings.Join(strings.Fields(got[i+1]), " ") != l {
			t.Fatalf("copy output line %d = %q, want %q", i+1, got[i+1], l)
		}
	}
	dst := openSpec(t, u)
	defer dst.Close()
	if back := storetest.Dump(t, dst); !reflect.DeepEqual(back, want) {
		t.Fatal("the target's rows differ from the source's")
	}

	code, stdout, stderr = runHappy(t, nil, "server", "migrate", "--from", "sqlite:"+data, "--to", u)
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "the target is not empty") || !strings.Contains(stderr, "--replace") {
		t.Fatalf("copy into a non-empty target = (%d, %q, %q)", code, stdout, stderr)
	}
	code, _, stderr = runHappy(t, nil, "server", "migrate", "--from", "sqlite:"+data, "--to", u, "--replace")
	if code != exitOK {
		t.Fatalf("copy with --replace = (%d, %q)", code, stderr)
	}
	code, _, stderr = runHappy(t, nil, "server", "migrate", "--from", "sqlite:"+filepath.Join(data, "nope.db"), "--to", u, "--replace")
	if code != exitFailed || !strings.Contains(stderr, "nope.db") {
		t.Fatalf("copy from a missing file = (%d, %q)", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "nope.db")); !os.IsNotExist(err) {
		t.Fatalf("copying from a missing file created it: %v", err)
	}
}

func TestServerMigrateUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"server", "migrate", "--from", "sqlite:x"}, "happy: --from and --to go together\n"},
		{[]string{"server", "migrate", "--from", "sqlite:x", "--to", "sqlite:y", "--db", "sqlite:z"}, "happy: --db and --data name the database to migrate; with --from and --to, name both databases there\n"},
		{[]string{"server", "migrate", "--replace"}, "happy: --replace needs --from and --to\n"},
		{[]string{"server", "migrate", "--db", "sqlite:x", "--data", "y"}, "happy: --db and --data are two ways to name the database: give one\n"},
		{[]string{"server", "migrate", "--db", "mysql://u:secret@h/db"}, "happy: --db: backend: unknown database \"mysql://u:xxxxx@h/db\": want postgres://… or sqlite:PATH\n"},
		{[]string{"server", "migrate", "--from", "sqlite:a", "--to", "sqlite:a"}, "happy: --from and --to name the same database\n"},
		{[]string{"server", "migrate", "--from", "sqlite:a", "--to", "sqlite:./b/../a"}, "happy: --from and --to name the same database\n"},
		{[]string{"server", "migrate", "--from", "x", "--to", "sqlite:a"}, "happy: --from: backend: unknown database \"x\": want postgres://… or sqlite:PATH\n"},
		{[]string{"server", "migrate", "extra"}, "happy: unknown command \"extra\" for \"happy server migrate\"\n"},
	}
	for _, c := range cases {
		code, stdout, stderr := runHappy(t, nil, c.args...)
		if code != exitUsage || stdout != "" || stderr != c.want {
			t.Errorf("happy %q = (%d, %q, %q), want exit 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// happy server refuses a bad --db before creating anything.
func TestServerBadDB(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, "data")
	code, stdout, stderr := runHappy(t, map[string]string{"HAPPY_HOME_DIR": home}, "server", "--data", data, "--db", "mysql://x")
	if code != exitUsage || stdout != "" || stderr != "happy: --db: backend: unknown database \"mysql://x\": want postgres://… or sqlite:PATH\n" {
		t.Fatalf("happy server --db mysql://x = (%d, %q, %q)", code, stdout, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("data folder created: %v", err)
	}
}

// happy server --db postgres://… serves from the database: an account
// created over HTTP is a row there, and the data folder holds no SQLite file.
func TestServerWithPostgres(t *testing.T) {
	u := pgtest.URL(t)
	home := t.TempDir()
	data := filepath.Join(home, "data")
	pr, pw := io.Pipe()
	f := newFactory(strings.NewReader(""), pw, io.Discard, func(k string) string { return map[string]string{"HAPPY_HOME_DIR": home}[k] })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, f, serverOptions{listen: "127.0.0.1:0", dataDir: data, synchronous: "NORMAL", db: u})
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no listening line: %v (%v)", err, <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr, rest, ok := strings.Cut(strings.TrimPrefix(line, "happy relay listening on "), " ")
	// The default bus of a PostgreSQL relay: LISTEN/NOTIFY on its database.
	if !ok || rest != "(data "+data+", database "+u+", bus "+busName(u)+")\n" || !strings.HasPrefix(busName(u), "postgres LISTEN/NOTIFY on 127.0.0.1:") {
		cancel()
		t.Fatalf("listening line %q", line)
	}
	acct := servertest.NewAccount(t, addr)
	req, _ := http.NewRequest("GET", addr+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+acct.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		t.Fatalf("list sessions: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop")
	}
	st := openSpec(t, u)
	defer st.Close()
	if n := len(storetest.Dump(t, st)["accounts"]); n != 1 {
		t.Fatalf("%d accounts in the database, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(data, "happy.db")); !os.IsNotExist(err) {
		t.Fatalf("a SQLite file was created beside a PostgreSQL relay: %v", err)
	}
}

// happy server migrate refuses a SQLite data folder that a running relay
// holds (its data folder lock), naming the relay's pid; once the relay
// stopped the same migration runs.
func TestServerMigrateRefusesRunningRelay(t *testing.T) {
	data := t.TempDir()
	srv, err := server.New(server.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u := pgtest.URL(t)
	held := "server: data folder in use by another relay: " + data + " (pid " + strconv.Itoa(os.Getpid()) + "): stop the relay first"
	for _, args := range [][]string{
		{"server", "migrate", "--from", "sqlite:" + data, "--to", u},
		{"server", "migrate", "--data", data},
		{"server", "migrate", "--db", "sqlite:" + filepath.Join(data, "happy.db")},
		{"server", "migrate", "--from", u, "--to", "sqlite:" + data, "--replace"},
	} {
		code, stdout, stderr := runHappy(t, nil, args...)
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, held) {
			t.Fatalf("%v with a running relay = (%d, %q, %q), want exit %d and %q", args, code, stdout, stderr, exitFailed, held)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runHappy(t, nil, "server", "migrate", "--from", "sqlite:"+data, "--to", u, "--replace")
	if code != exitOK || !strings.HasSuffix(stdout, "verified: every table holds the same rows in both\n") {
		t.Fatalf("migrate after the relay stopped = (%d, %q, %q)", code, stdout, stderr)
	}
	// The migration released the lock: a relay starts on the folder again.
	again, err := server.New(server.Config{DataDir: data})
	if err != nil {
		t.Fatalf("relay after migrate: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// --bus: none, the default (LISTEN/NOTIFY on a PostgreSQL --db, nothing
// with SQLite), or a NATS or PostgreSQL URL; anything else, or a bus
// without a PostgreSQL --db, is a usage error.
func TestServerBusFlag(t *testing.T) {
	pg := "postgres://u@h/db"
	for _, c := range []struct {
		flag, db, want, err string
	}{
		{"", pg, pg, ""},
		{"none", pg, "", ""},
		{"", "", "", ""},
		{"nats://n:4222", pg, "nats://n:4222", ""},
		{"postgres://other/db", pg, "postgres://other/db", ""},
		{"nats://n:4222", "", "", "--bus joins relays that share a PostgreSQL database: it needs --db postgres://…"},
		{"redis://r", pg, "", `--bus "redis://r": want nats://host:port, postgres://…, or none`},
	} {
		got, err := busFor(c.flag, c.db)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if got != c.want || msg != c.err {
			t.Errorf("busFor(%q, %q) = (%q, %q), want (%q, %q)", c.flag, c.db, got, msg, c.want, c.err)
		}
	}
	home := t.TempDir()
	code, stdout, stderr := runHappy(t, map[string]string{"HAPPY_HOME_DIR": home}, "server", "--bus", "nats://n:4222")
	if code != exitUsage || stdout != "" || stderr != "happy: --bus joins relays that share a PostgreSQL database: it needs --db postgres://…\n" {
		t.Fatalf("happy server --bus without --db = (%d, %q, %q)", code, stdout, stderr)
	}
	if busName("postgres://u:pw@db.example:5432/happy") != "postgres LISTEN/NOTIFY on db.example:5432/happy" || busName("nats://u:pw@n:4222") != "nats://n:4222" {
		t.Fatalf("busName shows %q, %q", busName("postgres://u:pw@db.example:5432/happy"), busName("nats://u:pw@n:4222"))
	}
}
