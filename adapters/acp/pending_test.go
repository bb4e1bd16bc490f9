package acp

import (
	"strconv"
	"testing"
)

// TestPendingAsMap: pending gives what a map gives, through puts,
// overwrites and removals, below and past pendingScan entries.
func TestPendingAsMap(t *testing.T) {
	var p pending[int]
	ref := map[string]int{}
	for i := range 2000 {
		k := strconv.Itoa(i * 37 % 53)
		switch i % 5 {
		case 0, 1, 3:
			p.put(k, i+1)
			ref[k] = i + 1
		default:
			p.remove(k)
			delete(ref, k)
		}
		if p.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", i, p.len(), len(ref))
		}
		for j := range 53 {
			kk := strconv.Itoa(j)
			if got := p.get(kk); got != ref[kk] {
				t.Fatalf("step %d: get(%q) = %d, want %d", i, kk, got, ref[kk])
			}
			want, wok := ref[kk]
			if got, ok := p.lookup(kk); got != want || ok != wok {
				t.Fatalf("step %d: lookup(%q) = %d, %v; want %d, %v", i, kk, got, ok, want, wok)
			}
			if got := p.getBytes([]byte(kk)); got != want {
				t.Fatalf("step %d: getBytes(%q) = %d, want %d", i, kk, got, want)
			}
			if k, ok := p.keyOf([]byte(kk)); ok && (k != kk || !wok) {
				t.Fatalf("step %d: keyOf(%q) = %q, %v", i, kk, k, ok)
			} else if !ok && wok && p.set == nil {
				t.Fatalf("step %d: keyOf(%q) finds no key in the list", i, kk)
			}
		}
		if i == 1000 {
			p.reset()
			clear(ref)
		}
	}
	var small pending[*ourRequest]
	if small.get("1") != nil || small.len() != 0 {
		t.Fatal("an empty table has an entry")
	}
}
