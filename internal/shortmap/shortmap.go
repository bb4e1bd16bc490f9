// Package shortmap is a map from string keys for tables that usually hold
// a few entries: a short list looked through in order while it holds at
// most Scan entries, an index (a Go map) past that. The protocol decoders
// keep their requests in flight, sessions and tools in such tables: a
// session rarely has more than a few open at once, so no map is made for
// them (a map's first slots are an allocation of several hundred bytes per
// table), and a peer that leaves many open costs no more than a map would.
package shortmap

import "iter"

// Scan is how many entries a Map looks through one by one before it keeps
// an index.
const Scan = 16

// Map behaves as a map[string]V whose absent keys read as the zero V. Its
// zero value is an empty table ready to use. It is not safe for concurrent
// use.
type Map[V any] struct {
	list []entry[V]
	set  map[string]V // the entries, once there were more than Scan
}

type entry[V any] struct {
	key string
	v   V
}

// Get returns the value of key, the zero V when there is none.
func (m *Map[V]) Get(key string) V {
	v, _ := m.Lookup(key)
	return v
}

// Lookup returns a copy of the value of key, and whether there is one (a
// copy: a removal moves the table's entries).
func (m *Map[V]) Lookup(key string) (V, bool) {
	if m.set != nil {
		v, ok := m.set[key]
		return v, ok
	}
	for i := range m.list {
		if m.list[i].key == key {
			return m.list[i].v, true
		}
	}
	var zero V
	return zero, false
}

// GetBytes is Get of the key written in b (say a sub-slice of a frame),
// without making a string of it.
func (m *Map[V]) GetBytes(b []byte) V {
	if m.set != nil {
		return m.set[string(b)]
	}
	for i := range m.list {
		if m.list[i].key == string(b) {
			return m.list[i].v
		}
	}
	var zero V
	return zero
}

// KeyOf returns the key written in b as the table holds it, when it has
// one in its list: a string already made, for a caller to keep instead of
// a new one (an indexed table answers false: a map does not give its keys
// back).
func (m *Map[V]) KeyOf(b []byte) (string, bool) {
	if m.set != nil {
		return "", false
	}
	for i := range m.list {
		if m.list[i].key == string(b) {
			return m.list[i].key, true
		}
	}
	return "", false
}

// Put sets the value of key.
func (m *Map[V]) Put(key string, v V) {
	if m.set != nil {
		m.set[key] = v
		return
	}
	for i := range m.list {
		if m.list[i].key == key {
			m.list[i].v = v
			return
		}
	}
	if len(m.list) < Scan {
		m.list = append(m.list, entry[V]{key, v})
		return
	}
	m.set = make(map[string]V, 2*Scan)
	for _, e := range m.list {
		m.set[e.key] = e.v
	}
	m.set[key] = v
	m.list = nil
}

// Take returns the value of key and whether there was one, and deletes it.
func (m *Map[V]) Take(key string) (V, bool) {
	if m.set != nil {
		v, ok := m.set[key]
		delete(m.set, key)
		return v, ok
	}
	for i := range m.list {
		if m.list[i].key == key {
			v := m.list[i].v
			m.removeAt(i)
			return v, true
		}
	}
	var zero V
	return zero, false
}

// Remove deletes key.
func (m *Map[V]) Remove(key string) { m.Take(key) }

// removeAt deletes the list's entry i, moving the last into its place.
func (m *Map[V]) removeAt(i int) {
	last := len(m.list) - 1
	m.list[i] = m.list[last]
	m.list[last] = entry[V]{}
	m.list = m.list[:last]
}

// Len is how many entries there are.
func (m *Map[V]) Len() int {
	if m.set != nil {
		return len(m.set)
	}
	return len(m.list)
}

// Reset forgets every entry and the room they took.
func (m *Map[V]) Reset() { *m = Map[V]{} }

// Clear forgets every entry, keeping the list's room (at most Scan
// entries, zeroed: nothing is held) for the next ones; an index is
// dropped.
func (m *Map[V]) Clear() {
	if m.set != nil {
		m.Reset()
		return
	}
	clear(m.list)
	m.list = m.list[:0]
}

// Indexed reports whether the table keeps an index (it held more than
// Scan entries since it was last reset).
func (m *Map[V]) Indexed() bool { return m.set != nil }

// Values yields every value, in no particular order.
func (m *Map[V]) Values() iter.Seq[V] {
	return func(yield func(V) bool) {
		if m.set != nil {
			for _, v := range m.set {
				if !yield(v) {
					return
				}
			}
			return
		}
		for _, e := range m.list {
			if !yield(e.v) {
				return
			}
		}
	}
}
