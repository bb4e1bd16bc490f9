package control

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLedgerTornLineKeepsTheNextEntry: a torn last line (a crash, or a
// full disk mid-write: Consume then fails closed, but partial bytes may
// stay) is written away when the ledger is next opened, so the next
// consumed id is not glued to it and lost after a restart (which would let
// that input be replayed; found by an attack review).
func TestLedgerTornLineKeepsTheNextEntry(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	// A first process consumed one id, then was torn mid-write of the next
	// (or its write hit a full disk: partial bytes, Consume returned an error).
	l, err := OpenLedger(dir, "sess1", now)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Consume("id:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", now.Add(time.Hour).UnixMilli()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	l.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "sess1.consumed"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("id:bbbbbbbbbbbbbbbb") // torn: no space, no newline
	f.Close()

	// The next process consumes a dialect ciphertext (kept for ever) and acts on it.
	l2, err := OpenLedger(dir, "sess1", now)
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Target: "sess1", Ledger: l2, Now: func() time.Time { return now }}
	ct := []byte("a captured reference-app permission ciphertext")
	if err := g.CheckDialect(ct); err != nil {
		t.Fatal(err)
	}
	l2.Close()

	// After a restart the relay serves the same ciphertext again.
	l3, err := OpenLedger(dir, "sess1", now)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	g3 := &Guard{Target: "sess1", Ledger: l3, Now: func() time.Time { return now }}
	if err := g3.CheckDialect(ct); err == nil {
		b, _ := os.ReadFile(filepath.Join(dir, "sess1.consumed"))
		t.Fatalf("a consumed input is accepted again after a restart; ledger file:\n%s", b)
	}
}
