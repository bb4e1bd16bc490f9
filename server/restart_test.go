package server

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay/wire"
)

// restartChildEnv names the data folder of the relay process of
// TestRestartVisibility; restartAddrEnv its listen address.
const (
	restartChildEnv = "HAPPY_SERVER_TEST_RESTART_DIR"
	restartAddrEnv  = "HAPPY_SERVER_TEST_RESTART_ADDR"
)

// TestRestartRelayProcess is not a test: it is the relay process of
// TestRestartVisibility (entered only when restartChildEnv is set). It
// serves until killed.
func TestRestartRelayProcess(t *testing.T) {
	dir := os.Getenv(restartChildEnv)
	if dir == "" {
		t.Skip("runs only as the relay process of TestRestartVisibility")
	}
	srv, err := New(Config{DataDir: dir, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var l net.Listener
	// The killed relay's port may take a moment to free.
	waitfor.Poll{Every: 5 * time.Millisecond, Within: time.Second}.True(func() bool {
		l, err = net.Listen("tcp", os.Getenv(restartAddrEnv))
		return err == nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = srv.Serve(context.Background(), l)
	os.Exit(0)
}

// startRestartRelay starts the relay process on dir at addr, in its own
// process group.
func startRestartRelay(t *testing.T, dir, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestartRelayProcess$")
	cmd.Env = append(os.Environ(), restartChildEnv+"="+dir, restartAddrEnv+"="+addr)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd
}

// readAll reads every message of the session, or fails with the first
// error (the relay not answering yet).
func readAll(ctx context.Context, cl *http.Client, base, token, sid string) (map[string]wire.Message, error) {
	got := map[string]wire.Message{}
	for after := int64(0); ; {
		var page struct {
			Messages []wire.Message
			HasMore  bool
		}
		st, err := httpJSON(ctx, cl, "GET", fmt.Sprintf("%s/v3/sessions/%s/messages?after_seq=%d&limit=500", base, sid, after), token, nil, &page)
		if err != nil {
			return nil, err
		}
		if st != 200 {
			return nil, fmt.Errorf("status %d", st)
		}
		for _, m := range page.Messages {
			got[*m.LocalID] = m
			after = m.Seq
		}
		if !page.HasMore || len(page.Messages) == 0 {
			return got, nil
		}
	}
}

// TestRestartVisibility: kill -9 of the relay during a write burst, a
// restart on the same folder and port, and a read the moment the relay
// answers again, several times over: every row acknowledged before a kill
// is in the very first answer after the restart, with its seq and content
// (not only some seconds later).
func TestRestartVisibility(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	base := "http://" + addr
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	waitUp := func() time.Time {
		t.Helper()
		var up time.Time
		waitfor.Poll{Every: time.Millisecond, Within: 20 * time.Second}.Until(t, "the relay to come up", func() bool {
			resp, err := cl.Get(base + "/health")
			if err != nil {
				return false
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			up = time.Now()
			return resp.StatusCode == 200
		})
		return up
	}

	cmd := startRestartRelay(t, dir, addr)
	waitUp()
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "restart")
	content := func(lid string) string { return "ct-" + lid + "-" + strings.Repeat("r", 300) }
	acked := map[string]ackedRow{}
	rng := rand.New(rand.NewPCG(15, 5))
	const rounds = 6
	for round := 0; round < rounds; round++ {
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				wcl := &http.Client{}
				for b := 0; ctx.Err() == nil; b++ {
					batch := make([]sentMessage, 1+(b+w)%25)
					for i := range batch {
						lid := fmt.Sprintf("r%d-w%d-b%d-%d", round, w, b, i)
						batch[i] = sentMessage{LocalID: lid, Content: content(lid)}
					}
					var out struct{ Messages []ackedRow }
					st, err := httpJSON(ctx, wcl, "POST", base+"/v3/sessions/"+sid+"/messages", token, map[string]any{"messages": batch}, &out)
					if err != nil || st != 200 {
						return // the relay died mid-request: not acknowledged
					}
					mu.Lock()
					for _, r := range out.Messages {
						acked[r.LocalID] = r
					}
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(150+rng.IntN(500)) * time.Millisecond)
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		cancel()
		wg.Wait()

		cmd = startRestartRelay(t, dir, addr)
		up := waitUp()
		got, err := readAll(context.Background(), cl, base, token, sid)
		if err != nil {
			t.Fatalf("round %d: first read after the restart: %v", round, err)
		}
		missing := 0
		for lid, r := range acked {
			m, ok := got[lid]
			if !ok {
				missing++
				continue
			}
			if m.Seq != r.Seq || m.ID != r.ID || m.Content.C != content(lid) {
				t.Fatalf("round %d: message %s: seq %d id %s, want seq %d id %s", round, lid, m.Seq, m.ID, r.Seq, r.ID)
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: the first read %s after the relay answered lacks %d of %d acknowledged rows",
				round, time.Since(up).Round(time.Millisecond), missing, len(acked))
		}
		seqs := make(map[int64]bool, len(got))
		for _, m := range got {
			seqs[m.Seq] = true
		}
		for i := int64(1); i <= int64(len(got)); i++ {
			if !seqs[i] {
				t.Fatalf("round %d: seq %d missing among %d rows", round, i, len(got))
			}
		}
		t.Logf("round %d: %d acknowledged, %d readable at once", round, len(acked), len(got))
	}
}
