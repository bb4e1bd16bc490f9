package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// IngestOptions shape an ingest run: Clients concurrent writers, each on
// its own session of the account, POSTing batches of Batch messages of
// Size bytes to /v3/sessions/:id/messages, one at a time, for Duration.
type IngestOptions struct {
	Clients  int
	Batch    int
	Size     int
	Duration time.Duration
}

// Ingest measures POST /v3/sessions/:id/messages: Ops is messages
// acknowledged, latency is per POST.
func Ingest(ctx context.Context, t Target, o IngestOptions) (Result, error) {
	o.Clients, o.Batch, o.Size = max(o.Clients, 1), max(o.Batch, 1), max(o.Size, 1)
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	res := Result{Kind: "ingest", Unit: "msg/s", Params: map[string]any{"clients": o.Clients, "batch": o.Batch, "size": o.Size, "duration": o.Duration.String()}}
	parent := ctx
	ctx, fl := newFailures(ctx)
	defer fl.cancel(nil)
	token, err := t.token(ctx)
	if err != nil {
		return res, err
	}
	run := runID()
	sids := make([]string, o.Clients)
	for i := range sids {
		if sids[i], err = NewSession(ctx, t, token, fmt.Sprintf("bench-ingest-%s-%d", run, i)); err != nil {
			return res, err
		}
	}
	body := content(o.Size)
	w, err := startWatch(t.Pid)
	if err != nil {
		return res, err
	}
	var ops atomic.Int64
	lat := make([][]time.Duration, o.Clients)
	start := time.Now()
	deadline := start.Add(o.Duration)
	// A post still unanswered endGrace after the run's end is cut off and
	// counted as failed: a slow relay does not stretch the run.
	postCtx, cancelPosts := context.WithDeadline(ctx, deadline.Add(endGrace))
	defer cancelPosts()
	var wg sync.WaitGroup
	for c := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := strings.TrimSuffix(t.URL, "/") + "/v3/sessions/" + sids[c] + "/messages"
			var buf bytes.Buffer
			for b := 0; time.Now().Before(deadline) && ctx.Err() == nil; b++ {
				buf.Reset()
				buf.WriteString(`{"messages":[`)
				for k := range o.Batch {
					if k > 0 {
						buf.WriteByte(',')
					}
					fmt.Fprintf(&buf, `{"localId":"%s-%d-%d-%d","content":"`, run, c, b, k)
					buf.WriteString(body)
					buf.WriteString(`"}`)
				}
				buf.WriteString(`]}`)
				t0 := time.Now()
				if err := post(postCtx, t.client(), url, token, buf.Bytes(), o.Batch); err != nil {
					if ctx.Err() == nil && postCtx.Err() != nil {
						err = fmt.Errorf("a post still unanswered %s after the run's end", endGrace)
					}
					fl.fail(err)
					if ctx.Err() != nil {
						return
					}
					continue
				}
				fl.ok()
				lat[c] = append(lat[c], time.Since(t0))
				ops.Add(int64(o.Batch))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	res.Ops, res.Errors, res.Seconds = ops.Load(), fl.n.Load(), el.Seconds()
	res.Throughput = float64(res.Ops) / el.Seconds()
	res.Latency = percentiles(all)
	fl.done(parent, &res)
	return res, w.end(&res)
}

// endGrace is how long a run waits, past its end, for what is in flight
// (a variable for the tests).
var endGrace = 5 * time.Second

// post sends one raw JSON body and wants a 200 with the relay's answer:
// {"messages":[…]} holding want stored messages.
func post(ctx context.Context, cl *http.Client, url, token string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	data, err := readAnswer(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, cut(data))
	}
	var out struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Messages) != want {
		return fmt.Errorf("not a relay's answer (want %d stored messages): %s", want, cut(data))
	}
	return nil
}

// FanoutOptions shape a fan-out run: Sockets connected sockets receive
// Messages messages of Size bytes, POSTed one per request to one session
// with Gap between posts. Sockets are session-scoped on that session, or
// with Account user-scoped (an app's socket: every session of the
// account). Wait bounds the wait for the last deliveries (5 s when zero).
// The run keeps 20 bytes per message it may post (an upper bound such as
// 1<<20 for a run ended by its context is fine). Without Gap the posts
// follow each other as fast as the relay answers them, so the latency is
// that of a relay kept busy, its queue included; with Gap it is that of
// a relay at that rate.
type FanoutOptions struct {
	Sockets  int
	Messages int
	Size     int
	Gap      time.Duration
	Account  bool
	Wait     time.Duration
	// Posting, when set, is called once, when every socket is connected
	// and the first message is about to be posted.
	Posting func()
}

// Fanout measures the delivery of new-message updates: Ops is updates
// delivered, latency is from a message's POST to its delivery on the
// last socket, Errors counts deliveries missing at the end, failed posts
// and sockets lost during the run.
func Fanout(ctx context.Context, t Target, o FanoutOptions) (Result, error) {
	o.Sockets, o.Messages, o.Size = max(o.Sockets, 1), max(o.Messages, 1), max(o.Size, 1)
	if o.Wait <= 0 {
		o.Wait = 5 * time.Second
	}
	res := Result{Kind: "fanout", Unit: "deliveries/s", Params: map[string]any{"sockets": o.Sockets, "messages": o.Messages, "size": o.Size, "gap": o.Gap.String(), "account": o.Account}}
	parent := ctx
	ctx, fl := newFailures(ctx)
	defer fl.cancel(nil)
	token, err := t.token(ctx)
	if err != nil {
		return res, err
	}
	run := runID()
	sid, err := NewSession(ctx, t, token, "bench-fanout-"+run)
	if err != nil {
		return res, err
	}
	sent := make([]int64, o.Messages)  // unix ns of each POST
	count := make([]int32, o.Messages) // sockets that got it
	last := make([]int64, o.Messages)  // unix ns of its last delivery
	var delivered atomic.Int64
	var allDone = make(chan struct{})
	var remaining atomic.Int64
	remaining.Store(int64(o.Sockets) * int64(o.Messages))
	marker := []byte(`"localId":"` + run + "-")
	onEvent := func(text []byte) {
		now := time.Now().UnixNano()
		i := bytes.Index(text, marker)
		if i < 0 {
			return
		}
		rest := text[i+len(marker):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return
		}
		n, err := strconv.Atoi(string(rest[:j]))
		if err != nil || n < 0 || n >= o.Messages {
			return
		}
		atomic.AddInt32(&count[n], 1)
		for {
			l := atomic.LoadInt64(&last[n])
			if now <= l || atomic.CompareAndSwapInt64(&last[n], l, now) {
				break
			}
		}
		delivered.Add(1)
		if remaining.Add(-1) == 0 {
			close(allDone)
		}
	}
	auth := map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sid}
	if o.Account {
		auth = map[string]any{"token": token, "clientType": "user-scoped"}
	}
	socks, dialErrs, _ := dialMany(ctx, t.URL, o.Sockets, auth, onEvent, fl)
	defer closeAll(socks)
	if len(socks) == 0 {
		return res, fmt.Errorf("bench: no socket connected (%d refused)", dialErrs)
	}
	if len(socks) < o.Sockets {
		remaining.Add(-int64(o.Sockets-len(socks)) * int64(o.Messages))
	}
	w, err := startWatch(t.Pid)
	if err != nil {
		return res, err
	}
	url := strings.TrimSuffix(t.URL, "/") + "/v3/sessions/" + sid + "/messages"
	body := content(o.Size)
	var posted int64 // messages the relay stored
	if o.Posting != nil {
		o.Posting()
	}
	start := time.Now()
	for i := range o.Messages {
		if ctx.Err() != nil {
			break
		}
		p := []byte(`{"messages":[{"localId":"` + run + "-" + strconv.Itoa(i) + `","content":"` + body + `"}]}`)
		atomic.StoreInt64(&sent[i], time.Now().UnixNano())
		if err := post(ctx, t.client(), url, token, p, 1); err != nil {
			fl.fail(err)
		} else {
			fl.ok()
			posted++
		}
		if o.Gap > 0 {
			select {
			case <-time.After(o.Gap):
			case <-ctx.Done():
			}
		}
	}
	select {
	case <-allDone:
	case <-time.After(o.Wait):
	case <-ctx.Done():
	}
	var end int64
	var lat []time.Duration
	for i := range o.Messages {
		l := atomic.LoadInt64(&last[i])
		if l == 0 {
			continue
		}
		end = max(end, l)
		if int(atomic.LoadInt32(&count[i])) == len(socks) {
			lat = append(lat, time.Duration(l-sent[i]))
		}
	}
	// The run lasts until its last delivery; an interrupted one, or one
	// with none, until now.
	el := time.Duration(end - start.UnixNano())
	if end == 0 || parent.Err() != nil {
		el = time.Since(start)
	}
	lost := countLost(socks)
	res.Ops = delivered.Load()
	// Errors: failed posts (fl), sockets refused or lost, and the
	// deliveries of stored messages that never came, unless the run was
	// cut short (its waits cut too).
	res.Errors = fl.n.Load() + int64(dialErrs) + int64(lost)
	if parent.Err() == nil {
		res.Errors += max(int64(len(socks))*posted-res.Ops, 0)
	}
	res.Seconds = el.Seconds()
	res.Throughput = float64(res.Ops) / el.Seconds()
	res.Latency = percentiles(lat)
	fl.done(parent, &res)
	return res, w.end(&res)
}

// dialMany connects n sockets, 32 at a time, and returns those that
// connected, the count refused and each connect's duration.
// A connect that fails is recorded in fl (whose run stops once the relay
// refuses maxInARow in a row).
func dialMany(ctx context.Context, base string, n int, auth map[string]any, onEvent func([]byte), fl *failures) ([]*sock, int, []time.Duration) {
	var mu sync.Mutex
	var out []*sock
	var lat []time.Duration
	var refused int
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for range n {
		if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			t0 := time.Now()
			s, err := dialSocket(dctx, base, auth, onEvent)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if ctx.Err() == nil {
					refused++
				}
				fl.fail(err)
				return
			}
			fl.ok()
			out = append(out, s)
			lat = append(lat, d)
		}()
	}
	wg.Wait()
	return out, refused, lat
}

func closeAll(socks []*sock) {
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Add(1)
		go func() { defer wg.Done(); s.close() }()
	}
	wg.Wait()
}

// SocketsOptions shape a sockets run: ramp to Sockets idle session-scoped
// sockets on one session, hold them for Hold (1 s when zero) and read the
// relay's memory.
type SocketsOptions struct {
	Sockets int
	Hold    time.Duration
	// Held, when set, runs at the end of the hold, after the relay's
	// memory is read and before the sockets close (a caller's own
	// measurement of the relay).
	Held func()
}

// Sockets measures idle connections: Ops is sockets connected, latency
// per connect, Throughput connects per second; with Target.Pid,
// Relay.KiBPerSocket is the relay's resident memory growth per socket.
func Sockets(ctx context.Context, t Target, o SocketsOptions) (Result, error) {
	o.Sockets = max(o.Sockets, 1)
	if o.Hold <= 0 {
		o.Hold = time.Second
	}
	res := Result{Kind: "sockets", Unit: "connects/s", Params: map[string]any{"sockets": o.Sockets, "hold": o.Hold.String()}}
	parent := ctx
	ctx, fl := newFailures(ctx)
	defer fl.cancel(nil)
	token, err := t.token(ctx)
	if err != nil {
		return res, err
	}
	sid, err := NewSession(ctx, t, token, "bench-sockets-"+runID())
	if err != nil {
		return res, err
	}
	w, err := startWatch(t.Pid)
	if err != nil {
		return res, err
	}
	start := time.Now()
	socks, refused, lat := dialMany(ctx, t.URL, o.Sockets, map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sid}, nil, fl)
	el := time.Since(start)
	defer closeAll(socks)
	holdEnd := time.After(o.Hold)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lost := 0
hold:
	for {
		select {
		case <-holdEnd:
			break hold
		case <-ctx.Done():
			break hold
		case <-tick.C:
			// Every socket gone (the relay ended): no point holding.
			if lost = countLost(socks); lost == len(socks) && lost > 0 {
				break hold
			}
		}
	}
	lost = countLost(socks)
	if lost > 0 && parent.Err() == nil {
		fl.fail(fmt.Errorf("the relay closed %d of the %d sockets while they were held", lost, len(socks)))
	}
	// Ops: sockets connected (the rate is theirs); Errors: refused, and
	// lost during the hold.
	res.Ops, res.Errors, res.Seconds = int64(len(socks)), int64(refused+lost), el.Seconds()
	res.Throughput = float64(res.Ops) / el.Seconds()
	res.Latency = percentiles(lat)
	fl.done(parent, &res)
	if err := w.end(&res); err != nil {
		return res, err
	}
	if o.Held != nil {
		o.Held()
	}
	if held := res.Ops - int64(lost); res.Relay != nil && held > 0 && res.Relay.RSSKiB > res.Relay.RSSBeforeKiB {
		res.Relay.KiBPerSocket = float64(res.Relay.RSSKiB-res.Relay.RSSBeforeKiB) / float64(held)
	}
	return res, nil
}

// RPCOptions shape an rpc run: Calls round trips, Concurrency at a time.
type RPCOptions struct {
	Calls       int
	Concurrency int
}

// RPC measures round trips through the relay: a session-scoped socket
// registers a method of its session (rpc-register), a user-scoped one
// calls it (rpc-call with an ack); the relay forwards rpc-request to the first, whose ack comes back
// as {ok:true, result}. Ops is calls answered ok, latency per call.
func RPC(ctx context.Context, t Target, o RPCOptions) (Result, error) {
	o.Calls, o.Concurrency = max(o.Calls, 1), max(o.Concurrency, 1)
	res := Result{Kind: "rpc", Unit: "calls/s", Params: map[string]any{"calls": o.Calls, "concurrency": o.Concurrency}}
	parent := ctx
	ctx, fl := newFailures(ctx)
	defer fl.cancel(nil)
	token, err := t.token(ctx)
	if err != nil {
		return res, err
	}
	// The reference contract wants methods named <sessionId>:<name>.
	sid, err := NewSession(ctx, t, token, "bench-rpc-"+runID())
	if err != nil {
		return res, err
	}
	method := sid + ":bench"
	// The session's own socket registers its method (happy's relay refuses
	// a user-scoped one); the caller is an app's user-scoped socket.
	calleeAuth := map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sid}
	auth := map[string]any{"token": token, "clientType": "user-scoped"}
	registered := make(chan struct{})
	var once sync.Once
	var regErr atomic.Value
	var callee *sock
	ready := make(chan struct{})
	onEvent := func(text []byte) {
		<-ready
		// text is 2[...] or 2<id>[...]
		id, rest := ackID(text[1:])
		switch {
		case bytes.HasPrefix(rest, []byte(`["rpc-registered"`)):
			once.Do(func() { close(registered) })
		case bytes.HasPrefix(rest, []byte(`["rpc-error"`)):
			regErr.Store(string(rest))
			once.Do(func() { close(registered) })
		case id >= 0 && bytes.HasPrefix(rest, []byte(`["rpc-request"`)):
			_ = callee.ack(id, "pong")
		}
	}
	callee, err = dialSocket(ctx, t.URL, calleeAuth, onEvent)
	close(ready)
	if err != nil {
		return res, err
	}
	defer callee.close()
	caller, err := dialSocket(ctx, t.URL, auth, nil)
	if err != nil {
		return res, err
	}
	defer caller.close()
	if err := callee.emit("rpc-register", map[string]any{"method": method}); err != nil {
		return res, err
	}
	select {
	case <-registered:
	case <-time.After(10 * time.Second):
		return res, errors.New("bench: rpc-register: no rpc-registered within 10 s")
	}
	if e, ok := regErr.Load().(string); ok {
		return res, fmt.Errorf("bench: rpc-register refused: %s", e)
	}
	w, err := startWatch(t.Pid)
	if err != nil {
		return res, err
	}
	var ok atomic.Int64
	lat := make([][]time.Duration, o.Concurrency)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for g := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(o.Calls) && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				r, err := caller.call(cctx, "rpc-call", map[string]any{"method": method, "params": "ping"})
				cancel()
				if err == nil && !bytes.Contains(r, []byte(`"ok":true`)) {
					err = fmt.Errorf("rpc-call answered %s", cut(r))
				}
				if err != nil {
					fl.fail(err)
					continue
				}
				fl.ok()
				lat[g] = append(lat[g], time.Since(t0))
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	res.Ops, res.Errors, res.Seconds = ok.Load(), fl.n.Load(), el.Seconds()
	res.Throughput = float64(res.Ops) / el.Seconds()
	res.Latency = percentiles(all)
	fl.done(parent, &res)
	return res, w.end(&res)
}

// cut is an answer's text for an error message: its first 200 bytes, one
// line.
func cut(data []byte) string {
	s := strings.Join(strings.Fields(string(data)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// countLost counts the sockets that have closed.
func countLost(socks []*sock) int {
	n := 0
	for _, s := range socks {
		select {
		case <-s.done:
			n++
		default:
		}
	}
	return n
}
