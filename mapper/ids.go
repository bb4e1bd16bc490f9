package mapper

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Id prefixes of the canonical model (seed 001): sessions, messages and
// parts, and the ids the reducer makes up for permission and question
// blocks when the provider gives none.
const (
	PrefixSession    = "ses_"
	PrefixMessage    = "msg_"
	PrefixPart       = "prt_"
	PrefixPermission = "per_"
	PrefixQuestion   = "q_"
)

// idPosWidth is the number of hex digits of the position field: 12 digits
// hold 2^48 positions, far more than one session ever creates.
const idPosWidth = 12

// idHashWidth is the number of hex digits of the identity hash.
const idHashWidth = 16

// MakeID builds a canonical id:
//
//	prefix + position (12 lowercase hex digits, zero-padded) + hash (16 lowercase hex digits)
//
// e.g. MakeID("msg_", "relay-1", 5, "call_1") = "msg_000000000005" + 16 hex
// digits. The position is where the thing first appeared in the native
// stream (the reducer counts creations), so ids of one session sort in order
// of first appearance; the hash is FNV-1a (64 bit) of the relay session id,
// the prefix and the provider identity, so the same position in two sessions
// gives two different ids. The result depends only on the arguments: the
// same native stream always yields the same ids, and wall-clock time plays
// no part. Positions at or above 16^12 keep sorting correctly only among
// themselves (the field grows wider).
func MakeID(prefix, relaySessionID string, pos uint64, identity string) string {
	h := fnv.New64a()
	// Separators keep ("ab","c") and ("a","bc") apart.
	_, _ = h.Write([]byte(relaySessionID))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(prefix))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(identity))
	sum := h.Sum64()

	var b strings.Builder
	b.Grow(len(prefix) + idPosWidth + idHashWidth)
	b.WriteString(prefix)
	writeHex(&b, pos, idPosWidth)
	writeHex(&b, sum, idHashWidth)
	return b.String()
}

// writeHex writes v in lowercase hex, zero-padded to width digits.
func writeHex(b *strings.Builder, v uint64, width int) {
	var buf [16]byte
	s := strconv.AppendUint(buf[:0], v, 16)
	for i := len(s); i < width; i++ {
		b.WriteByte('0')
	}
	b.Write(s)
}

// IDPosition returns the position field of an id made by MakeID with the
// given prefix, and false when id does not have that shape.
func IDPosition(id, prefix string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) < idPosWidth+idHashWidth {
		return 0, false
	}
	pos, err := strconv.ParseUint(rest[:len(rest)-idHashWidth], 16, 64)
	if err != nil {
		return 0, false
	}
	if _, err := strconv.ParseUint(rest[len(rest)-idHashWidth:], 16, 64); err != nil {
		return 0, false
	}
	return pos, true
}

// IDSource hands out the ids of one relay session in order of first
// appearance: each call to Next takes the next position. It is not safe for
// concurrent use; the reducer owns one.
type IDSource struct {
	relay string
	next  uint64
}

// NewIDSource returns an IDSource for the relay session relaySessionID,
// starting at position 0.
func NewIDSource(relaySessionID string) *IDSource {
	return &IDSource{relay: relaySessionID}
}

// Next returns MakeID(prefix, relaySessionID, position, identity) and
// advances the position. identity is the provider's own identity of the
// thing (message key, call id, block key), "" when it has none.
func (s *IDSource) Next(prefix, identity string) string {
	id := MakeID(prefix, s.relay, s.next, identity)
	s.next++
	return id
}

// Position returns the position the next id will take.
func (s *IDSource) Position() uint64 { return s.next }
