package control

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
)

// BenchmarkApproval is what sealed control adds to one approval, on both
// ends: the caller makes and seals the envelope, the session opens it,
// checks it against its ledger (an fsync'd append: the durable part) and
// seals the bound answer, and the caller opens and checks that. The relay
// round trip and the agent are not in it. Compare BenchmarkApprovalBefore,
// the sealing and opening the plain params and result always cost.
func BenchmarkApproval(b *testing.B) {
	ci := benchCipher(b)
	l, err := OpenLedger(b.TempDir(), "sess", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	g := &Guard{Target: "sess", Ledger: l}
	params := map[string]any{"callID": "toolu_01", "decision": "once"}
	b.ReportAllocs()
	for b.Loop() {
		e, _ := New("sess", "permission", params, time.Now())
		plain, _ := json.Marshal(e)
		sealed, _ := ci.Seal(plain)
		opened, err := ci.Open(sealed)
		if err != nil {
			b.Fatal(err)
		}
		got, err := Parse(opened)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Check(got, "permission"); err != nil {
			b.Fatal(err)
		}
		ans, _ := json.Marshal(Answer{Re: got.ID, Result: json.RawMessage(`{"ok":true}`)})
		sealedAns, _ := ci.Seal(ans)
		openedAns, _ := ci.Open(sealedAns)
		if _, err := OpenAnswer(openedAns, e.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApprovalBefore is the same approval as sealed params and a
// sealed result without envelopes or a ledger: the cost before.
func BenchmarkApprovalBefore(b *testing.B) {
	ci := benchCipher(b)
	params := map[string]any{"callID": "toolu_01", "decision": "once"}
	b.ReportAllocs()
	for b.Loop() {
		plain, _ := json.Marshal(params)
		sealed, _ := ci.Seal(plain)
		opened, err := ci.Open(sealed)
		if err != nil {
			b.Fatal(err)
		}
		var p map[string]any
		_ = json.Unmarshal(opened, &p)
		sealedAns, _ := ci.Seal([]byte(`{"ok":true}`))
		if _, err := ci.Open(sealedAns); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLedgerConsume is the durable part alone: one fsync'd append.
func BenchmarkLedgerConsume(b *testing.B) {
	l, err := OpenLedger(b.TempDir(), "sess", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	for b.Loop() {
		e, _ := New("sess", "x", nil, time.Now())
		if _, err := l.Consume("id:"+e.ID, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func benchCipher(b *testing.B) crypto.Cipher {
	b.Helper()
	var key [32]byte
	return crypto.NewDataKeyCipher(key)
}

// BenchmarkEnvelope is the CPU sealed control adds apart from the ledger's
// disk write: making, encoding and parsing the envelope and the bound
// answer (the sealing itself is in BenchmarkApprovalBefore).
func BenchmarkEnvelope(b *testing.B) {
	params := map[string]any{"callID": "toolu_01", "decision": "once"}
	b.ReportAllocs()
	for b.Loop() {
		e, _ := New("sess", "permission", params, time.Now())
		plain, _ := json.Marshal(e)
		got, err := Parse(plain)
		if err != nil {
			b.Fatal(err)
		}
		ans, _ := json.Marshal(Answer{Re: got.ID, Result: json.RawMessage(`{"ok":true}`)})
		if _, err := OpenAnswer(ans, e.ID); err != nil {
			b.Fatal(err)
		}
	}
}
