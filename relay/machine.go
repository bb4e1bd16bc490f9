package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/happy-dev/happy/control"
	"github.com/happy-dev/happy/crypto"
)

// MachineOptions describe this machine for OpenMachine.
type MachineOptions struct {
	// ID is the machineId from settings.json (settings.EnsureMachineID). Required.
	ID string
	// Metadata is the plaintext JSON metadata to create the machine with
	// (ignored when the relay already knows the id).
	Metadata json.RawMessage
	// DaemonState, when set, is the initial daemon state on create.
	DaemonState json.RawMessage
}

// Machine is this machine's record on the relay, with a machine-scoped
// socket: the machine-alive heartbeat (every 20 s), compare-and-set of its
// metadata and daemon state, and machine RPC methods ("<machineId>:<name>").
type Machine struct {
	c      *Client
	id     string
	cipher crypto.Cipher
	conn   *conn

	mu          sync.Mutex
	metadata    json.RawMessage
	metaVer     int64
	daemonState json.RawMessage
	daemonVer   int64
	rpc         *rpcTable

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// OpenMachine registers the machine (POST /v1/machines, idempotent by id) and
// connects its socket. Unlike sessions the machine must be created now: the
// error wraps ErrUnavailable when the relay cannot be reached.
func (c *Client) OpenMachine(ctx context.Context, opts MachineOptions) (*Machine, error) {
	if opts.ID == "" {
		return nil, fmt.Errorf("relay: open machine: empty id: %w", ErrRejected)
	}
	enc, err := c.creds.MachineEncryption()
	if err != nil {
		return nil, fmt.Errorf("relay: machine key: %w", err)
	}
	md := opts.Metadata
	if md == nil {
		md = json.RawMessage(`{}`)
	}
	sealed, err := enc.Cipher.Seal(md)
	if err != nil {
		return nil, fmt.Errorf("relay: seal machine metadata: %w", err)
	}
	in := MachineCreate{ID: opts.ID, Metadata: b64(sealed), DataEncryptionKey: enc.DataEncryptionKeyBase64()}
	if opts.DaemonState != nil {
		ds, err := enc.Cipher.Seal(opts.DaemonState)
		if err != nil {
			return nil, fmt.Errorf("relay: seal daemon state: %w", err)
		}
		v := b64(ds)
		in.DaemonState = &v
	}
	info, err := c.api.CreateMachine(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("relay: open machine: %w", err)
	}
	m := &Machine{c: c, id: opts.ID, cipher: enc.Cipher}
	if v, err := openPayload(enc.Cipher, "machine metadata", 0, info.Metadata); err == nil {
		m.metadata = v
	} else {
		c.log.Warn().Err(err).Msg("machine metadata does not decrypt")
	}
	m.metaVer = info.MetadataVersion
	if info.DaemonState != nil {
		if v, err := openPayload(enc.Cipher, "daemon state", 0, *info.DaemonState); err == nil {
			m.daemonState = v
		}
	}
	m.daemonVer = info.DaemonStateVersion
	m.ctx, m.cancel = context.WithCancel(c.ctx)
	m.rpc = newRPCTable(m.ctx, m.ID, enc.Cipher, c.controlDir(), c.now,
		func(err error) { c.log.Warn().Err(err).Msg("machine rpc decrypt failure") })
	m.conn = m.newConn()
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.conn.run(m.ctx) }()
	return m, nil
}

// ID is the machine id.
func (m *Machine) ID() string { return m.id }

// Metadata returns the machine metadata (plaintext JSON) and its version.
func (m *Machine) Metadata() (json.RawMessage, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.metadata, m.metaVer
}

// DaemonState returns the daemon state (nil when null) and its version.
func (m *Machine) DaemonState() (json.RawMessage, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.daemonState, m.daemonVer
}

// UpdateMetadata sets the machine metadata with compare-and-set
// (machine-update-metadata); see Session.UpdateMetadata.
func (m *Machine) UpdateMetadata(ctx context.Context, fn Updater) error {
	return compareAndSet(ctx, m.conn, m.c.cfg.AckTimeout, casSpec{
		event: "machine-update-metadata", idKey: "machineId", id: m.id, valueKey: "metadata", cipher: m.cipher,
		get: m.Metadata,
		set: func(v json.RawMessage, ver int64) { m.mu.Lock(); m.metadata, m.metaVer = v, ver; m.mu.Unlock() },
	}, fn)
}

// UpdateDaemonState sets the daemon state with compare-and-set
// (machine-update-state); fn may return nil for null.
func (m *Machine) UpdateDaemonState(ctx context.Context, fn Updater) error {
	return compareAndSet(ctx, m.conn, m.c.cfg.AckTimeout, casSpec{
		event: "machine-update-state", idKey: "machineId", id: m.id, valueKey: "daemonState", nullable: true, cipher: m.cipher,
		get: m.DaemonState,
		set: func(v json.RawMessage, ver int64) { m.mu.Lock(); m.daemonState, m.daemonVer = v, ver; m.mu.Unlock() },
	}, fn)
}

// RegisterRPC makes name callable as "<machineId>:<name>", with sealed
// control envelopes only; see Session.RegisterRPC.
func (m *Machine) RegisterRPC(name string, h RPCHandler) { m.register(name, rpcEntry{h: h}) }

// RegisterDialectRPC is RegisterRPC for a method the reference app calls
// (spawn, stop-session); see Session.RegisterDialectRPC.
func (m *Machine) RegisterDialectRPC(name string, shape control.Shape, h RPCHandler) {
	m.register(name, dialectEntry(shape, h))
}

func (m *Machine) register(name string, e rpcEntry) {
	m.rpc.set(name, e)
	if sock, _ := m.conn.current(); sock != nil {
		if err := registerAll(sock, m.id+":", []string{name}); err != nil {
			m.c.log.Warn().Err(err).Msg("machine rpc not registered now; it is registered on the next connection")
		}
	}
}

// OnRefused sets fn to be told of every machine RPC call refused (replayed,
// wrong target, unsealed, stale); fn must not block.
func (m *Machine) OnRefused(fn func(Refused)) { m.rpc.setRefused(fn) }

// WaitConnected waits until the machine's socket is up (its RPCs are
// registered right after), at most until ctx ends; the error then wraps
// ErrUnavailable.
func (m *Machine) WaitConnected(ctx context.Context) error {
	_, err := m.conn.wait(ctx)
	return err
}

// Connected reports whether the machine's socket is up.
func (m *Machine) Connected() bool {
	s, _ := m.conn.current()
	return s != nil && s.Connected()
}

// Close disconnects the machine's socket. Safe to call more than once.
func (m *Machine) Close() error {
	m.once.Do(func() {
		m.cancel()
		m.wg.Wait()
		m.rpc.close()
	})
	return nil
}

func (m *Machine) handleUpdate(args []any, _ func(...any)) {
	u, err := decodeUpdate(args)
	if err != nil || u.Body.T != "update-machine" || u.Body.MachineID != m.id {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := u.Body.Metadata; v != nil && v.Version > m.metaVer && v.Value != nil {
		if md, err := openPayload(m.cipher, "machine metadata", 0, *v.Value); err == nil {
			m.metadata, m.metaVer = md, v.Version
		}
	}
	if v := u.Body.DaemonState; v != nil && v.Version > m.daemonVer {
		if v.Value == nil {
			m.daemonState, m.daemonVer = nil, v.Version
		} else if ds, err := openPayload(m.cipher, "daemon state", 0, *v.Value); err == nil {
			m.daemonState, m.daemonVer = ds, v.Version
		}
	}
}

func (m *Machine) newConn() *conn {
	cn := &conn{
		dial:    m.c.dial,
		baseURL: m.c.api.BaseURL(),
		auth: func(context.Context) (map[string]any, error) {
			return map[string]any{"token": m.c.creds.Token, "clientType": "machine-scoped", "machineId": m.id}, nil
		},
		handlers: map[string]func([]any, func(...any)){
			"update":      m.handleUpdate,
			"rpc-request": m.rpc.handleRequest,
		},
		onConnect: func(ctx context.Context, sock Socket) {
			if err := registerAll(sock, m.id+":", m.rpc.names()); err != nil {
				m.c.log.Warn().Err(err).Msg("machine rpc registration failed")
			}
		},
		alive: func() (string, any) {
			return "machine-alive", map[string]any{"machineId": m.id, "time": m.c.now().UnixMilli()}
		},
		aliveEvery: 20 * time.Second,
		backoff:    m.c.cfg.Backoff,
		log:        m.c.log,
	}
	cn.init()
	return cn
}
