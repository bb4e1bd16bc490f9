package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresChannel is the LISTEN/NOTIFY channel of the relay bus.
const PostgresChannel = "happy_relay_bus"

// postgresKeep is how long a published row stays in relay_bus: long enough
// for every listening instance to read it (they read within milliseconds),
// then the next prune removes it.
const postgresKeep = time.Minute

// postgresSchema creates the bus table (UNLOGGED: its rows live a minute
// and need no crash safety). It is the bus's own, outside the store's
// versioned migrations, so that the bus works on any database the relays
// can reach.
const postgresSchema = `CREATE UNLOGGED TABLE IF NOT EXISTS relay_bus (
    id          BIGSERIAL PRIMARY KEY,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    body        BYTEA NOT NULL
)`

// schemaLock is the advisory lock key held while creating the table
// (the bytes of "happybus").
const schemaLock int64 = 0x6861707079627573

// pgBus publishes a row and a notification "<id>:<origin>" in one
// statement; the listener skips its own origin and reads the others' rows
// by id, in notification order (PostgreSQL delivers notifications in
// commit order).
type pgBus struct {
	url    string
	pool   *pgxpool.Pool
	origin string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	listening atomic.Bool
	lastErr   atomic.Pointer[string]

	// onResume is called after the LISTEN connection was made again
	// (OnResume).
	onResume func()
}

// resumeMark is the id the listener passes on when its LISTEN is back
// after a loss (row ids start at 1).
const resumeMark = 0

// OpenPostgres connects to the database at url (a libpq URL, usually the
// relay's own --db), creates the bus table when missing, and returns the
// bus. Delivery starts with Start.
func OpenPostgres(ctx context.Context, url string) (Bus, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("bus: postgres: %w", err)
	}
	if err := createSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	b := &pgBus{url: url, pool: pool, origin: hex.EncodeToString(rnd[:])}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

func createSchema(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("bus: postgres: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLock); err != nil {
		return fmt.Errorf("bus: postgres: %w", err)
	}
	if _, err := tx.Exec(ctx, postgresSchema); err != nil {
		return fmt.Errorf("bus: postgres: create relay_bus: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("bus: postgres: %w", err)
	}
	return nil
}

const publishSQL = `WITH e AS (INSERT INTO relay_bus (body) VALUES ($1) RETURNING id)
SELECT pg_notify('` + PostgresChannel + `', e.id::text || ':' || $2) FROM e`

func (b *pgBus) Publish(ctx context.Context, msg []byte) error {
	if len(msg) > MaxMessage {
		return ErrTooLarge
	}
	if b.ctx.Err() != nil {
		return ErrClosed
	}
	if _, err := b.pool.Exec(ctx, publishSQL, msg, b.origin); err != nil {
		return fmt.Errorf("bus: postgres publish: %w", err)
	}
	return nil
}

func (b *pgBus) OnResume(fn func()) { b.onResume = fn }

func (b *pgBus) Start(deliver func([]byte)) error {
	ids := make(chan int64, 65536)
	b.wg.Add(3)
	go b.listen(ids)
	go b.read(ids, deliver)
	go b.prune()
	return nil
}

// listen holds the LISTEN connection, reconnecting after a failure, and
// passes the others' ids on.
func (b *pgBus) listen(ids chan<- int64) {
	defer b.wg.Done()
	defer close(ids)
	for lost := false; b.ctx.Err() == nil; lost = true {
		err := b.listenOnce(ids, lost)
		b.listening.Store(false)
		if b.ctx.Err() != nil {
			return
		}
		msg := err.Error()
		b.lastErr.Store(&msg)
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// listenOnce runs one LISTEN connection; after a lost one (lost), it
// passes resumeMark on once it listens, before any notification of the
// new connection.
func (b *pgBus) listenOnce(ids chan<- int64, lost bool) error {
	conn, err := pgx.Connect(b.ctx, b.url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(b.ctx, `LISTEN `+PostgresChannel); err != nil {
		return err
	}
	b.listening.Store(true)
	b.lastErr.Store(nil)
	if lost {
		select {
		case ids <- resumeMark:
		case <-b.ctx.Done():
			return b.ctx.Err()
		}
	}
	for {
		n, err := conn.WaitForNotification(b.ctx)
		if err != nil {
			return err
		}
		idText, origin, ok := strings.Cut(n.Payload, ":")
		if !ok || origin == b.origin {
			continue
		}
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil {
			continue
		}
		select {
		case ids <- id:
		case <-b.ctx.Done():
			return b.ctx.Err()
		}
	}
}

// read takes the ids waiting (up to 512 at a time), reads their rows in
// one query and delivers them in notification order; a resumeMark calls
// onResume after the ids before it.
func (b *pgBus) read(ids <-chan int64, deliver func([]byte)) {
	defer b.wg.Done()
	batch := make([]int64, 0, 512)
	for id := range ids {
		resumed := id == resumeMark
		batch = batch[:0]
		if !resumed {
			batch = append(batch, id)
		}
	more:
		for !resumed && len(batch) < cap(batch) {
			select {
			case id, ok := <-ids:
				if !ok {
					break more
				}
				if id == resumeMark {
					resumed = true
					break more
				}
				batch = append(batch, id)
			default:
				break more
			}
		}
		if !b.deliverBatch(batch, deliver) {
			// The batch's rows could not be read: lost as in a gap.
			resumed = true
		}
		if resumed && b.onResume != nil {
			b.onResume()
		}
	}
}

// deliverBatch reads the rows of ids and delivers them in that order. It
// reports false when the rows could not be read (the database stayed away
// for the fetch's retries) and the batch is lost.
func (b *pgBus) deliverBatch(batch []int64, deliver func([]byte)) bool {
	if len(batch) == 0 {
		return true
	}
	bodies, err := b.fetch(batch)
	if err != nil {
		msg := err.Error()
		b.lastErr.Store(&msg)
		return b.ctx.Err() != nil
	}
	for _, id := range batch {
		if body, ok := bodies[id]; ok {
			deliver(body)
		}
	}
	return true
}

func (b *pgBus) fetch(ids []int64) (map[int64][]byte, error) {
	var out map[int64][]byte
	var err error
	// A row is committed before its notification is sent, so it is there;
	// a failure (the database restarting) is tried again for a while.
	for attempt := 0; attempt < 10; attempt++ {
		out, err = b.fetchOnce(ids)
		if err == nil || b.ctx.Err() != nil {
			return out, err
		}
		select {
		case <-b.ctx.Done():
			return nil, b.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("bus: postgres read: %w", err)
}

func (b *pgBus) fetchOnce(ids []int64) (map[int64][]byte, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	rows, err := b.pool.Query(ctx, `SELECT id, body FROM relay_bus WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64][]byte, len(ids))
	for rows.Next() {
		var id int64
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, err
		}
		out[id] = body
	}
	return out, rows.Err()
}

// prune removes rows older than postgresKeep every ten seconds.
func (b *pgBus) prune() {
	defer b.wg.Done()
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			_, _ = b.pool.Exec(ctx, `DELETE FROM relay_bus WHERE created_at < now() - make_interval(secs => $1)`, postgresKeep.Seconds())
			cancel()
		}
	}
}

func (b *pgBus) Ready(ctx context.Context) error {
	if b.ctx.Err() != nil {
		return ErrClosed
	}
	if err := b.pool.Ping(ctx); err != nil {
		return fmt.Errorf("bus: postgres: %w", err)
	}
	if !b.listening.Load() {
		why := "not started"
		if p := b.lastErr.Load(); p != nil {
			why = *p
		}
		return errors.New("bus: postgres: not listening: " + why)
	}
	return nil
}

func (b *pgBus) Close() error {
	b.cancel()
	b.wg.Wait()
	b.pool.Close()
	return nil
}
