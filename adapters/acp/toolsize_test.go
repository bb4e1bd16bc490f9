package acp

import (
	"testing"
	"unsafe"
)

// TestToolStructSizes: a tool struct is allocated for every call (or
// taken from the pool of emptied ones, resetTools), its side caches by the few tools that use
// them; at 512 and 160 bytes both fill their size class exactly, so a
// field more takes the next one (576 and 176 bytes). A change that needs
// one should move another out (docs/ARCHITECTURE.md "Mapping and delivery
// figures").
func TestToolStructSizes(t *testing.T) {
	if n := unsafe.Sizeof(tool{}); n > 512 {
		t.Errorf("tool is %d bytes, more than 512", n)
	}
	if n := unsafe.Sizeof(toolSide{}); n > 160 {
		t.Errorf("toolSide is %d bytes, more than 160", n)
	}
	// The decoder struct of each session, 416 bytes, its size class
	// exactly too (the next is 448).
	if n := unsafe.Sizeof(Decoder{}); n > 416 {
		t.Errorf("Decoder is %d bytes, more than 416", n)
	}
}
