package ptyproxy

import (
	"bytes"
	"sort"
	"strconv"
)

// modeTracker watches the child's output for the terminal modes it turns on
// (DEC private modes set with CSI ? Pm h / reset with CSI ? Pm l, and the
// kitty keyboard protocol's CSI > flags u push / CSI < n u pop), so that the
// modes a crashed or killed child left on can be turned off when the
// terminal is handed back: cursor hidden, alternate screen, bracketed
// paste, mouse reporting, focus events, application cursor keys,
// synchronized output, enhanced keyboard.
//
// It is a byte-at-a-time state machine, so sequences split across reads
// are recognised; a sequence longer than maxSeq bytes is abandoned.
type modeTracker struct {
	state   int
	private byte   // '?', '>', '<', '=' or 0
	params  []byte // parameter bytes of the sequence being read
	set     map[int]bool
	kitty   int // pushes minus pops of the kitty keyboard stack
}

const (
	stGround = iota
	stEsc
	stCSI
)

const maxSeq = 64

// modeDefault says whether DEC private mode n is tracked, and its default
// state (true: set).
func modeDefault(n int) (def, tracked bool) {
	switch n {
	case 25: // cursor visible
		return true, true
	case 1, // application cursor keys
		47, 1047, 1049, // alternate screen
		1000, 1002, 1003, 1005, 1006, 1015, // mouse reporting and encodings
		1004, // focus in/out events
		2004, // bracketed paste
		2026: // synchronized output
		return false, true
	}
	return false, false
}

func newModeTracker() *modeTracker { return &modeTracker{set: map[int]bool{}} }

// Write feeds output bytes to the tracker.
func (m *modeTracker) Write(p []byte) {
	for _, b := range p {
		switch m.state {
		case stGround:
			if b == 0x1b {
				m.state = stEsc
			}
		case stEsc:
			switch b {
			case '[':
				m.state, m.private, m.params = stCSI, 0, m.params[:0]
			case 0x1b:
			default:
				m.state = stGround
			}
		case stCSI:
			switch {
			case len(m.params) == 0 && m.private == 0 && (b == '?' || b == '>' || b == '<' || b == '='):
				m.private = b
			case b >= '0' && b <= '9' || b == ';' || b == ':':
				if len(m.params) >= maxSeq {
					m.state = stGround
					continue
				}
				m.params = append(m.params, b)
			case b >= 0x40 && b <= 0x7e:
				m.final(b)
				m.state = stGround
			case b == 0x1b:
				m.state = stEsc
			case b >= 0x20 && b <= 0x2f:
				// intermediate bytes: not a sequence we track
				m.private = 'x'
			default:
				m.state = stGround
			}
		}
	}
}

func (m *modeTracker) final(b byte) {
	switch {
	case m.private == '?' && (b == 'h' || b == 'l'):
		for _, f := range bytes.Split(m.params, []byte{';'}) {
			n, err := strconv.Atoi(string(f))
			if err != nil {
				continue
			}
			if def, ok := modeDefault(n); ok {
				on := b == 'h'
				if on == def {
					delete(m.set, n)
				} else {
					m.set[n] = on
				}
			}
		}
	case m.private == '>' && b == 'u':
		m.kitty++
	case m.private == '<' && b == 'u':
		n := 1
		if len(m.params) > 0 {
			if v, err := strconv.Atoi(string(m.params)); err == nil {
				n = v
			}
		}
		m.kitty = max(0, m.kitty-n)
	}
}

// Reset returns the bytes that put every tracked mode back to its default
// (empty when nothing is left on): keyboard and mouse modes first, then the
// alternate screen, the cursor last.
func (m *modeTracker) Reset() []byte {
	var out []byte
	if m.kitty > 0 {
		out = append(out, "\x1b[<"+strconv.Itoa(m.kitty)+"u"...)
	}
	modes := make([]int, 0, len(m.set))
	for n := range m.set {
		modes = append(modes, n)
	}
	rank := func(n int) int {
		switch n {
		case 25:
			return 2
		case 47, 1047, 1049:
			return 1
		}
		return 0
	}
	sort.Slice(modes, func(i, j int) bool {
		if rank(modes[i]) != rank(modes[j]) {
			return rank(modes[i]) < rank(modes[j])
		}
		return modes[i] < modes[j]
	})
	for _, n := range modes {
		c := byte('l')
		if def, _ := modeDefault(n); def {
			c = 'h'
		}
		out = append(out, "\x1b[?"+strconv.Itoa(n)...)
		out = append(out, c)
	}
	return out
}
