package jsonlex

import (
	"encoding/binary"
	"math/bits"
)

// maxDepth is encoding/json's limit of nested objects and arrays.
const maxDepth = 10000

// strSafe marks the bytes a JSON string may hold as they are: not the
// quote, not the backslash, not a control character.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Valid reports whether data is one JSON value with only whitespace around
// it, exactly as json.Valid decides (the same grammar, strings may hold any
// byte but a control character, at most 10000 nested containers), in one
// pass without the state machine. It is what a decoder calls before
// reading a document by structure (Members, Field, ObjectMap).
func Valid(data []byte) bool {
	var stack []byte // '{' or '[' per open container
	i := SkipSpace(data, 0)
	const (
		wantValue = iota
		wantKey
		afterValue
	)
	state := wantValue
	for {
		switch state {
		case wantValue:
			if i >= len(data) {
				return false
			}
			switch c := data[i]; {
			case c == '{' || c == '[':
				if stack = append(stack, c); len(stack) > maxDepth {
					return false
				}
				i = SkipSpace(data, i+1)
				if i < len(data) && data[i] == c+2 { // '}' or ']'
					stack = stack[:len(stack)-1]
					i++
					state = afterValue
				} else if c == '{' {
					state = wantKey
				}
				continue
			case c == '"':
				if i = validString(data, i); i < 0 {
					return false
				}
			case c == 't':
				if !hasLiteral(data, i, "true") {
					return false
				}
				i += 4
			case c == 'f':
				if !hasLiteral(data, i, "false") {
					return false
				}
				i += 5
			case c == 'n':
				if !hasLiteral(data, i, "null") {
					return false
				}
				i += 4
			default:
				if i = validNumber(data, i); i < 0 {
					return false
				}
			}
			state = afterValue
		case wantKey:
			if i >= len(data) || data[i] != '"' {
				return false
			}
			if i = validString(data, i); i < 0 {
				return false
			}
			i = SkipSpace(data, i)
			if i >= len(data) || data[i] != ':' {
				return false
			}
			i = SkipSpace(data, i+1)
			state = wantValue
		case afterValue:
			i = SkipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			top := stack[len(stack)-1]
			switch data[i] {
			case ',':
				i = SkipSpace(data, i+1)
				if top == '{' {
					state = wantKey
				} else {
					state = wantValue
				}
			case top + 2: // the container's own close
				stack = stack[:len(stack)-1]
				i++
			default:
				return false
			}
		}
	}
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// validString returns the index past the valid string starting at data[i]
// (a '"'), or -1.
func validString(data []byte, i int) int {
	i++
	for {
		// Eight bytes at a time while none of them needs a look (long
		// texts), then straight to the first that does: the lowest byte
		// lookMask flags is exact (a borrow only carries upwards), so the
		// loop byte by byte is left for the last few bytes of data.
		for len(data)-i >= 8 {
			if m := lookMask(binary.LittleEndian.Uint64(data[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(data) && strSafe[data[i]] {
			i++
		}
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

// lookMask flags (the high bit of the byte) the bytes of w that need a
// look: a quote, a backslash or a control character (a byte below 0x20),
// by the classic tests for a zero byte and for a byte less than n, on
// every byte at once. A byte of 0x80 or more is never flagged by itself.
// A flag above a flagged byte may be false (the subtractions borrow
// upwards), but the lowest flag is always a byte that needs a look and no
// byte below it does.
func lookMask(w uint64) uint64 {
	q, b := w^(ones*'"'), w^(ones*'\\')
	return ((q-ones)&^q | (b-ones)&^b | (w-ones*0x20)&^w) & highs
}

// ones and highs are the byte masks of the eight-byte tests.
const ones, highs = 0x0101010101010101, 0x8080808080808080

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validNumber returns the index past the number starting at data[i], or -1.
func validNumber(data []byte, i int) int {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		i++
		j := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == j {
			return -1
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == j {
			return -1
		}
	}
	return i
}
