package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/happy-dev/happy/control"
	"github.com/happy-dev/happy/crypto"
)

// RPCHandler answers one RPC call. params is the decrypted JSON the caller
// sent: the envelope's params for a sealed control input ({} when it had
// none), or the whole plaintext of the reference app's dialect (RegisterDialectRPC).
// The result is marshalled to JSON, sealed and returned to the caller; an
// error is returned to the caller as an error answer (sealed too). ctx ends
// before the relay's own 30 s call timeout.
type RPCHandler func(ctx context.Context, params json.RawMessage) (any, error)

// Refused describes a control input this client refused (a replay, a wrong
// target, an unsealed or stale input) so the owner can record it where the
// person sees it.
type Refused struct {
	Method string         // the RPC's method without its scope, or control.MethodPrompt
	Reason control.Reason // why
	Detail string         // what was wrong
}

// rpcTimeout bounds a handler: the relay gives up on a call after 30 s.
const rpcTimeout = 25 * time.Second

// rpcEntry is one registered method.
type rpcEntry struct {
	h RPCHandler
	// dialect, when set, is the shape of the reference app's params the
	// method also accepts without an envelope.
	dialect *control.Shape
}

// rpcTable is the RPC side of a socket owner (session or machine): its
// methods, registered as "<scope id>:<name>" after every connection, and
// the guard that checks every call against the scope's ledger of consumed
// inputs (docs/ARCHITECTURE.md, "Trust").
type rpcTable struct {
	scope  func() string // the session's relay id, or the machine id
	cipher crypto.Cipher
	dir    string // the ledgers' folder
	count  func(error)
	ctx    context.Context
	now    func() time.Time

	mu      sync.Mutex
	methods map[string]rpcEntry
	guard   *control.Guard
	onRef   func(Refused)
}

func newRPCTable(ctx context.Context, scope func() string, cipher crypto.Cipher, dir string, now func() time.Time, count func(error)) *rpcTable {
	return &rpcTable{scope: scope, cipher: cipher, dir: dir, count: count, ctx: ctx, now: now, methods: map[string]rpcEntry{}}
}

// set registers name; it reports the names to register with the relay.
func (t *rpcTable) set(name string, e rpcEntry) {
	t.mu.Lock()
	t.methods[name] = e
	t.mu.Unlock()
}

func (t *rpcTable) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.methods))
	for n := range t.methods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (t *rpcTable) entry(name string) (rpcEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.methods[name]
	return e, ok
}

// setRefused sets the callback told of every refused input.
func (t *rpcTable) setRefused(fn func(Refused)) {
	t.mu.Lock()
	t.onRef = fn
	t.mu.Unlock()
}

func (t *rpcTable) tellRefused(r Refused) {
	t.mu.Lock()
	fn := t.onRef
	t.mu.Unlock()
	if fn != nil {
		fn(r)
	}
}

// getGuard opens the scope's ledger on first use (the session's relay id
// is known only once it is created).
func (t *rpcTable) getGuard() (*control.Guard, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.guard != nil {
		return t.guard, nil
	}
	scope := t.scope()
	if scope == "" {
		return nil, errors.New("relay: control input before the session exists on the relay")
	}
	l, err := control.OpenLedger(t.dir, scope, t.now())
	if err != nil {
		return nil, err
	}
	t.guard = &control.Guard{Target: scope, Ledger: l, Now: t.now}
	return t.guard, nil
}

// close closes the ledger.
func (t *rpcTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.guard != nil {
		_ = t.guard.Ledger.Close()
		t.guard = nil
	}
}

// controlDir is the folder of the ledgers of consumed control inputs:
// Config.ControlDir, else "control" beside the outbox.
func (c *Client) controlDir() string {
	if c.cfg.ControlDir != "" {
		return c.cfg.ControlDir
	}
	return filepath.Join(filepath.Dir(filepath.Clean(c.cfg.OutboxDir)), "control")
}

// registerAll emits rpc-register for every name and reports the first
// failure (the caller logs it; the next connection registers again).
func registerAll(s Socket, prefix string, names []string) error {
	var first error
	for _, n := range names {
		if err := s.Emit("rpc-register", map[string]any{"method": prefix + n}); err != nil && first == nil {
			first = fmt.Errorf("relay: register rpc %s%s: %w", prefix, n, err)
		}
	}
	return first
}

// handleRequest serves one rpc-request {method, params:<b64 ciphertext>}
// and acknowledges with b64(seal(answer)). A sealed control envelope is
// checked (target, method, time, single use) before its handler runs and
// answered with a control.Answer bound to its id; the reference app's
// dialect, where the method allows it, is accepted once per ciphertext and
// answered in its own shape. Absent, null or clear params are refused. The
// handler runs on its own goroutine so the socket keeps reading.
func (t *rpcTable) handleRequest(args []any, ack func(reply ...any)) {
	if ack == nil {
		return
	}
	seal := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"error": "encode result: " + err.Error()})
		}
		sealed, err := t.cipher.Seal(b)
		if err != nil {
			ack(nil)
			return
		}
		ack(b64(sealed))
	}
	var req struct {
		Method string `json:"method"`
		Params any    `json:"params"`
	}
	if len(args) > 0 {
		if b, err := json.Marshal(args[0]); err == nil {
			_ = json.Unmarshal(b, &req)
		}
	}
	name, ok := strings.CutPrefix(req.Method, t.scope()+":")
	e, known := t.entry(name)
	if !ok || !known {
		seal(map[string]string{"error": fmt.Sprintf("unknown method %q", req.Method)})
		return
	}
	refuse := func(re string, reason control.Reason, detail string) {
		t.tellRefused(Refused{Method: name, Reason: reason, Detail: detail})
		if re != "" {
			seal(control.Answer{Re: re, Error: detail, Reason: reason})
			return
		}
		seal(map[string]string{"error": (&control.Refusal{Reason: reason, Detail: detail}).Error()})
	}
	p, isString := req.Params.(string)
	if !isString || p == "" {
		refuse("", control.ReasonUnsealed, "the call carries no sealed params")
		return
	}
	raw, err := unb64(p)
	if err != nil {
		err := &DecryptError{What: "rpc params", Reason: fmt.Errorf("%w: %v", crypto.ErrBadEncoding, err)}
		t.count(err)
		seal(map[string]string{"error": err.Error()})
		return
	}
	plain, err := t.cipher.Open(raw)
	if err != nil || !json.Valid(plain) {
		if err == nil {
			err = fmt.Errorf("%w: decrypted payload is not JSON", ErrProtocol)
		}
		derr := &DecryptError{What: "rpc params", Reason: err}
		t.count(derr)
		seal(map[string]string{"error": derr.Error()})
		return
	}
	guard, err := t.getGuard()
	if err != nil {
		seal(map[string]string{"error": "the control ledger cannot be used: " + err.Error()})
		return
	}
	env, err := control.Parse(plain)
	var params json.RawMessage
	re := ""
	switch {
	case errors.Is(err, control.ErrNotEnvelope):
		if e.dialect == nil {
			refuse("", control.ReasonUnsealed, "params are not a sealed control envelope")
			return
		}
		if err := e.dialect.Check(plain); err != nil {
			t.refusal("", err, refuse, seal)
			return
		}
		if err := guard.CheckDialect(raw); err != nil {
			t.refusal("", err, refuse, seal)
			return
		}
		params = plain
	case err != nil:
		t.refusal("", err, refuse, seal)
		return
	default:
		if err := guard.Check(env, name); err != nil {
			t.refusal(env.ID, err, refuse, seal)
			return
		}
		re, params = env.ID, env.Params
		if len(params) == 0 {
			params = json.RawMessage("{}")
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(t.ctx, rpcTimeout)
		defer cancel()
		res, err := safeCall(ctx, e.h, params)
		switch {
		case re == "" && err != nil:
			seal(map[string]string{"error": err.Error()})
		case re == "":
			seal(res)
		case err != nil:
			a := control.Answer{Re: re, Error: err.Error()}
			if r, ok := control.ReasonOf(err); ok {
				a.Reason = r
			}
			seal(a)
		default:
			b, merr := json.Marshal(res)
			if merr != nil {
				seal(control.Answer{Re: re, Error: "encode result: " + merr.Error()})
				return
			}
			seal(control.Answer{Re: re, Result: b})
		}
	}()
}

// refusal answers a refused input: a *control.Refusal with its reason, any
// other error (the ledger's disk) as it is.
func (t *rpcTable) refusal(re string, err error, refuse func(string, control.Reason, string), seal func(any)) {
	var r *control.Refusal
	if errors.As(err, &r) {
		refuse(re, r.Reason, r.Detail)
		return
	}
	if re != "" {
		seal(control.Answer{Re: re, Error: err.Error()})
		return
	}
	seal(map[string]string{"error": err.Error()})
}

// safeCall runs h and turns a panic into an error, so one bad handler does
// not take the process down.
func safeCall(ctx context.Context, h RPCHandler, params json.RawMessage) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rpc handler panicked: %v", p)
		}
	}()
	return h(ctx, params)
}

// RegisterRPC makes name callable by other devices as "<sessionId>:<name>"
// (e.g. "permission", "abort"), with sealed control envelopes only
// (control.Envelope: bound to this session and name, single use, recent).
// It is registered with the relay now when connected and again after every
// reconnection. Registering a name again replaces its handler.
func (s *Session) RegisterRPC(name string, h RPCHandler) { s.register(name, rpcEntry{h: h}) }

// RegisterDialectRPC is RegisterRPC for a method the reference app calls:
// besides sealed envelopes it accepts the app's plain sealed params when
// they have exactly its shape, each ciphertext once (docs/ARCHITECTURE.md,
// "Trust": what that dialect cannot carry). A shape without a required
// member cannot be told from other ciphertexts of the session: such a
// method takes envelopes only.
func (s *Session) RegisterDialectRPC(name string, shape control.Shape, h RPCHandler) {
	s.register(name, dialectEntry(shape, h))
}

func dialectEntry(shape control.Shape, h RPCHandler) rpcEntry {
	if len(shape.Required) == 0 {
		return rpcEntry{h: h}
	}
	return rpcEntry{h: h, dialect: &shape}
}

func (s *Session) register(name string, e rpcEntry) {
	s.rpc.set(name, e)
	if sock, _ := s.conn.current(); sock != nil {
		if err := registerAll(sock, s.ID()+":", []string{name}); err != nil {
			s.c.log.Warn().Err(err).Str("tag", s.tag).Msg("rpc not registered now; it is registered on the next connection")
		}
	}
}

// OnRefused sets fn to be told of every control input the session refused
// (an RPC call or, through CheckPrompt, a prompt row), after the caller was
// answered; the runner records it on the transcript. fn must not block.
func (s *Session) OnRefused(fn func(Refused)) { s.rpc.setRefused(fn) }

// newConn builds the session-scoped socket: `update` events feed the
// receive path and the state cache, rpc-request calls the handlers, and
// every connection re-registers the RPC methods and re-fetches messages.
func (s *Session) newConn() *conn {
	cn := &conn{
		dial:    s.c.dial,
		baseURL: s.c.api.BaseURL(),
		auth: func(ctx context.Context) (map[string]any, error) {
			sid, err := s.WaitCreated(ctx)
			if err != nil {
				return nil, err
			}
			return map[string]any{"token": s.c.creds.Token, "clientType": "session-scoped", "sessionId": sid}, nil
		},
		handlers: map[string]func([]any, func(...any)){
			"update":      s.handleUpdate,
			"rpc-request": s.rpc.handleRequest,
			"rpc-error": func(args []any, _ func(...any)) {
				s.c.log.Warn().Interface("error", args).Str("tag", s.tag).Msg("rpc error from relay")
			},
		},
		onConnect: func(ctx context.Context, sock Socket) {
			if err := registerAll(sock, s.ID()+":", s.rpc.names()); err != nil {
				s.c.log.Warn().Err(err).Str("tag", s.tag).Msg("rpc registration failed")
			}
			s.rcv.kick()
			// The relay may join the socket to the session's room only
			// after the connect; a message stored in between reaches neither
			// the fetch above nor the socket. Fetch once more a moment later.
			time.AfterFunc(time.Second, s.rcv.kick)
		},
		alive: func() (string, any) {
			s.stateMu.Lock()
			thinking, mode := s.thinking, s.mode
			s.stateMu.Unlock()
			return "session-alive", map[string]any{"sid": s.ID(), "time": s.c.now().UnixMilli(), "thinking": thinking, "mode": mode}
		},
		aliveEvery: 2 * time.Second,
		backoff:    s.c.cfg.Backoff,
		log:        s.c.log,
	}
	cn.init()
	return cn
}

// PromptShape is the reference app's prompt row (its text, {role:"user",
// content, meta?}, and its file events, {role:"session", content}), the
// only rows AcceptPrompt takes without an envelope.
var PromptShape = control.Shape{Required: []string{"role", "content"}, Optional: []string{"meta"}}

// AcceptPrompt checks a prompt row of the session's stream before the
// runner acts on it: ctl is the row's "control" member (a sealed
// control.Envelope for this session and control.MethodPrompt), or empty
// for a row of the reference app's dialect, accepted only when dialect is
// true and then once per ciphertext (in.Sealed). It returns nil when the
// prompt may run; a *control.Refusal (replayed, wrong_target, stale,
// unsealed, malformed), which the OnRefused callback was also told of; or
// the ledger's error (the prompt must not run either).
func (s *Session) AcceptPrompt(in Incoming, ctl json.RawMessage, dialect bool) error {
	guard, err := s.rpc.getGuard()
	if err != nil {
		return err
	}
	switch {
	case len(ctl) > 0:
		var env control.Envelope
		if env, err = control.Parse(ctl); errors.Is(err, control.ErrNotEnvelope) {
			err = &control.Refusal{Reason: control.ReasonMalformed, Detail: "the prompt's control member is not an envelope"}
		} else if err == nil {
			err = guard.Check(env, control.MethodPrompt)
		}
	case dialect:
		raw, derr := unb64(in.Sealed)
		if derr != nil {
			return &DecryptError{What: "message", Seq: in.Seq, Reason: fmt.Errorf("%w: %v", crypto.ErrBadEncoding, derr)}
		}
		if err = PromptShape.Check(in.Plaintext); err == nil {
			err = guard.CheckDialect(raw)
		}
	default:
		err = &control.Refusal{Reason: control.ReasonUnsealed, Detail: "the prompt carries no control envelope"}
	}
	var r *control.Refusal
	if errors.As(err, &r) {
		s.rpc.tellRefused(Refused{Method: control.MethodPrompt, Reason: r.Reason, Detail: r.Detail})
	}
	if err == nil {
		// The session records the prompt under the sender's record id:
		// its own versions of that record come after the sender's, never
		// on top of it (which the relay would answer "already stored",
		// a conflict for a row that is no one else's).
		if rec, v, ok := splitLocalID(in.LocalID); ok {
			s.RaiseVersion(rec, v)
		}
	}
	return err
}
