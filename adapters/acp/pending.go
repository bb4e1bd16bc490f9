package acp

import "iter"

// pending is a table of requests in flight by id key: a short list looked
// through in order while it holds at most pendingScan entries (requests
// are answered quickly, so a session rarely has more than a few open at
// once, and no map is made for them), an index past that (a peer that
// leaves many unanswered costs no more than a map would). It behaves as a
// map[string]V whose absent keys read as the zero V.
type pending[V any] struct {
	list []pendingEntry[V]
	set  map[string]V // the entries, once there were more than pendingScan
}

type pendingEntry[V any] struct {
	key string
	v   V
}

// pendingScan is how many entries pending looks through one by one
// before it keeps an index.
const pendingScan = 16

// get returns the value of key, the zero V when there is none.
func (p *pending[V]) get(key string) V {
	if p.set != nil {
		return p.set[key]
	}
	for i := range p.list {
		if p.list[i].key == key {
			return p.list[i].v
		}
	}
	var zero V
	return zero
}

// lookup returns a copy of the value of key, and whether there is one
// (a copy: a removal moves the table's entries).
func (p *pending[V]) lookup(key string) (V, bool) {
	if p.set != nil {
		v, ok := p.set[key]
		return v, ok
	}
	for i := range p.list {
		if p.list[i].key == key {
			return p.list[i].v, true
		}
	}
	var zero V
	return zero, false
}

// getBytes is get of the key written in b (a sub-slice of a frame),
// without making a string of it.
func (p *pending[V]) getBytes(b []byte) V {
	if p.set != nil {
		return p.set[string(b)]
	}
	for i := range p.list {
		if p.list[i].key == string(b) {
			return p.list[i].v
		}
	}
	var zero V
	return zero
}

// keyOf returns the key written in b as the table holds it, when it has
// one in its list: a string already made, for a caller to keep instead of
// a new one (an indexed table answers false: a map does not give its keys
// back).
func (p *pending[V]) keyOf(b []byte) (string, bool) {
	if p.set != nil {
		return "", false
	}
	for i := range p.list {
		if p.list[i].key == string(b) {
			return p.list[i].key, true
		}
	}
	return "", false
}

// put sets the value of key.
func (p *pending[V]) put(key string, v V) {
	if p.set != nil {
		p.set[key] = v
		return
	}
	for i := range p.list {
		if p.list[i].key == key {
			p.list[i].v = v
			return
		}
	}
	if len(p.list) < pendingScan {
		p.list = append(p.list, pendingEntry[V]{key, v})
		return
	}
	p.set = make(map[string]V, 2*pendingScan)
	for _, e := range p.list {
		p.set[e.key] = e.v
	}
	p.set[key] = v
	p.list = nil
}

// remove deletes key.
func (p *pending[V]) remove(key string) {
	if p.set != nil {
		delete(p.set, key)
		return
	}
	for i := range p.list {
		if p.list[i].key == key {
			last := len(p.list) - 1
			p.list[i] = p.list[last]
			p.list[last] = pendingEntry[V]{}
			p.list = p.list[:last]
			return
		}
	}
}

// len is how many entries there are.
func (p *pending[V]) len() int {
	if p.set != nil {
		return len(p.set)
	}
	return len(p.list)
}

// reset forgets every entry.
func (p *pending[V]) reset() { *p = pending[V]{} }

// clear forgets every entry, keeping the list's room (at most
// pendingScan entries, zeroed: nothing is held) for the next ones; an
// index is dropped.
func (p *pending[V]) clear() {
	if p.set != nil {
		p.reset()
		return
	}
	clear(p.list)
	p.list = p.list[:0]
}

// values yields every value, in no particular order.
func (p *pending[V]) values() iter.Seq[V] {
	return func(yield func(V) bool) {
		if p.set != nil {
			for _, v := range p.set {
				if !yield(v) {
					return
				}
			}
			return
		}
		for _, e := range p.list {
			if !yield(e.v) {
				return
			}
		}
	}
}
