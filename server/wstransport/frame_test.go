package wstransport

import (
	"strings"
	"testing"
)

// TextFrame builds the websocket frame header for each payload length
// class (RFC 6455 §5.2).
func TestTextFrame(t *testing.T) {
	for _, tc := range []struct {
		n      int
		header []byte
	}{
		{0, []byte{0x81, 1}},
		{124, []byte{0x81, 125}},
		{125, []byte{0x81, 126, 0, 126}},
		{65534, []byte{0x81, 126, 0xff, 0xff}},
		{65535, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		text := []byte(strings.Repeat("a", tc.n))
		f := TextFrame(text)
		if string(f[:len(tc.header)]) != string(tc.header) {
			t.Errorf("n=%d: header % x, want % x", tc.n, f[:len(tc.header)], tc.header)
		}
		if rest := f[len(tc.header):]; rest[0] != '4' || string(rest[1:]) != string(text) || len(f) != len(tc.header)+1+tc.n {
			t.Errorf("n=%d: payload wrong (%d bytes)", tc.n, len(f))
		}
	}
}

// A packet the transport writes is one unmasked, final frame with the
// shortest length encoding (RFC 6455 §5.2).
func TestDataFrameHeader(t *testing.T) {
	for _, c := range []struct {
		op   byte
		n    int
		want []byte
	}{
		{opText, 0, []byte{0x81, 0}},
		{opBinary, 125, []byte{0x82, 125}},
		{opText, 126, []byte{0x81, 126, 0, 126}},
		{opBinary, 65535, []byte{0x82, 126, 0xff, 0xff}},
		{opText, 65536, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		payload := make([]byte, c.n)
		f := dataFrame(c.op, payload)
		if got := f[:len(f)-c.n]; string(got) != string(c.want) || len(f) != len(c.want)+c.n {
			t.Errorf("op %d, %d bytes: header % x (frame %d bytes), want % x", c.op, c.n, got, len(f), c.want)
		}
	}
}
