package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/happy-dev/happy/crypto"
)

// RPCHandler answers one RPC call. params is the decrypted JSON the caller
// sent (null when it sent nothing). The result is marshalled to JSON,
// encrypted and returned to the caller; an error is returned to the caller
// as {"error": err.Error()} (encrypted too). ctx ends before the relay's own
// 30 s call timeout.
type RPCHandler func(ctx context.Context, params json.RawMessage) (any, error)

// rpcTimeout bounds a handler: the relay gives up on a call after 30 s.
const rpcTimeout = 25 * time.Second

// rpcSet is the RPC side of a socket owner (session or machine): methods are
// registered as "<scope id>:<name>" after every connection.
type rpcSet struct {
	prefix func() string // "<sid>:" or "<machineId>:"
	cipher crypto.Cipher
	get    func(name string) (RPCHandler, bool)
	count  func(error)
	ctx    context.Context
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
// and acknowledges with b64(encrypt(result)) or b64(encrypt({error})). The
// handler runs on its own goroutine so the socket keeps reading.
func (r rpcSet) handleRequest(args []any, ack func(reply ...any)) {
	if ack == nil {
		return
	}
	reply := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"error": "encode result: " + err.Error()})
		}
		sealed, err := r.cipher.Seal(b)
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
	name, ok := strings.CutPrefix(req.Method, r.prefix())
	h, known := r.get(name)
	if !ok || !known {
		reply(map[string]string{"error": fmt.Sprintf("unknown method %q", req.Method)})
		return
	}
	params := json.RawMessage("null")
	if p, isString := req.Params.(string); isString {
		plain, err := openPayload(r.cipher, "rpc params", 0, p)
		if err != nil {
			r.count(err)
			reply(map[string]string{"error": err.Error()})
			return
		}
		params = plain
	} else if req.Params != nil {
		err := &DecryptError{What: "rpc params", Reason: fmt.Errorf("%w: params are not an encrypted string", ErrProtocol)}
		r.count(err)
		reply(map[string]string{"error": err.Error()})
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(r.ctx, rpcTimeout)
		defer cancel()
		res, err := safeCall(ctx, h, params)
		if err != nil {
			reply(map[string]string{"error": err.Error()})
			return
		}
		reply(res)
	}()
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
// (e.g. "permission", "abort"). It is registered with the relay now when
// connected and again after every reconnection. Registering a name again
// replaces its handler.
func (s *Session) RegisterRPC(name string, h RPCHandler) {
	s.stateMu.Lock()
	s.rpc[name] = h
	s.stateMu.Unlock()
	if sock, _ := s.conn.current(); sock != nil {
		if err := registerAll(sock, s.ID()+":", []string{name}); err != nil {
			s.c.log.Warn().Err(err).Str("tag", s.tag).Msg("rpc not registered now; it is registered on the next connection")
		}
	}
}

func (s *Session) rpcNames() []string {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	names := make([]string, 0, len(s.rpc))
	for n := range s.rpc {
		names = append(names, n)
	}
	return names
}

func (s *Session) rpcHandler(name string) (RPCHandler, bool) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	h, ok := s.rpc[name]
	return h, ok
}

// newConn builds the session-scoped socket: `update` events feed the
// receive path and the state cache, rpc-request calls the handlers, and
// every connection re-registers the RPC methods and re-fetches messages.
func (s *Session) newConn() *conn {
	rpc := rpcSet{prefix: func() string { return s.ID() + ":" }, cipher: s.cipher, get: s.rpcHandler, count: s.countDecrypt, ctx: s.ctx}
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
			"rpc-request": rpc.handleRequest,
			"rpc-error": func(args []any, _ func(...any)) {
				s.c.log.Warn().Interface("error", args).Str("tag", s.tag).Msg("rpc error from relay")
			},
		},
		onConnect: func(ctx context.Context, sock Socket) {
			if err := registerAll(sock, s.ID()+":", s.rpcNames()); err != nil {
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
