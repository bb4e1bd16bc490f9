package shortmap

import (
	"strconv"
	"testing"
)

// TestMapAsMap: Map gives what a map gives, through puts, overwrites,
// takes and removals, below and past Scan entries, and after a reset and a
// clear.
func TestMapAsMap(t *testing.T) {
	var m Map[int]
	ref := map[string]int{}
	for i := range 3000 {
		k := strconv.Itoa(i * 37 % 53)
		switch i % 6 {
		case 0, 1, 3:
			m.Put(k, i+1)
			ref[k] = i + 1
		case 4:
			want, wok := ref[k]
			if got, ok := m.Take(k); got != want || ok != wok {
				t.Fatalf("step %d: Take(%q) = %d, %v; want %d, %v", i, k, got, ok, want, wok)
			}
			delete(ref, k)
		default:
			m.Remove(k)
			delete(ref, k)
		}
		if m.Len() != len(ref) {
			t.Fatalf("step %d: Len %d, want %d", i, m.Len(), len(ref))
		}
		for j := range 53 {
			kk := strconv.Itoa(j)
			want, wok := ref[kk]
			if got := m.Get(kk); got != want {
				t.Fatalf("step %d: Get(%q) = %d, want %d", i, kk, got, want)
			}
			if got, ok := m.Lookup(kk); got != want || ok != wok {
				t.Fatalf("step %d: Lookup(%q) = %d, %v; want %d, %v", i, kk, got, ok, want, wok)
			}
			if got := m.GetBytes([]byte(kk)); got != want {
				t.Fatalf("step %d: GetBytes(%q) = %d, want %d", i, kk, got, want)
			}
			if k, ok := m.KeyOf([]byte(kk)); ok && (k != kk || !wok) {
				t.Fatalf("step %d: KeyOf(%q) = %q, %v", i, kk, k, ok)
			} else if !ok && wok && !m.Indexed() {
				t.Fatalf("step %d: KeyOf(%q) finds no key in the list", i, kk)
			}
		}
		sum, want := 0, 0
		for v := range m.Values() {
			sum += v
		}
		for _, v := range ref {
			want += v
		}
		if sum != want {
			t.Fatalf("step %d: Values sum to %d, want %d", i, sum, want)
		}
		switch i {
		case 1000:
			m.Reset()
			clear(ref)
		case 2000:
			m.Clear()
			clear(ref)
		}
	}
}

// TestMapIndexesPastScan: the list holds Scan entries; one more makes the
// index, and Clear and Reset drop it.
func TestMapIndexesPastScan(t *testing.T) {
	var m Map[string]
	if m.Get("x") != "" || m.Len() != 0 || m.Indexed() {
		t.Fatal("an empty table has an entry")
	}
	for i := range Scan {
		m.Put(strconv.Itoa(i), "v")
	}
	if m.Indexed() || m.Len() != Scan {
		t.Fatalf("after %d puts: indexed %v, len %d", Scan, m.Indexed(), m.Len())
	}
	m.Put("more", "v")
	if !m.Indexed() || m.Len() != Scan+1 || m.Get("0") != "v" || m.Get("more") != "v" {
		t.Fatalf("past Scan: indexed %v, len %d", m.Indexed(), m.Len())
	}
	m.Clear()
	if m.Indexed() || m.Len() != 0 {
		t.Fatalf("after Clear: indexed %v, len %d", m.Indexed(), m.Len())
	}
}
