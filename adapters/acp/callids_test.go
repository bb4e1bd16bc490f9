package acp

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// turnFrames is one prompt turn with two tool calls: one whose ACP id is
// new (t-<n>) and one whose id every turn reuses (call_0).
func turnFrames(n int) []jsonrpc.Frame {
	id := 100 + n
	tm := int64(n) * 1000
	update := func(u string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":` + u + `}}`
	}
	return []jsonrpc.Frame{
		frame(tm, trafficlog.C2A, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"go"}]}}`, id)),
		frame(tm+1, trafficlog.A2C, update(fmt.Sprintf(`{"sessionUpdate":"tool_call","toolCallId":"t-%d","title":"ls","kind":"execute","status":"pending","rawInput":{"command":"ls"}}`, n))),
		frame(tm+2, trafficlog.A2C, update(fmt.Sprintf(`{"sessionUpdate":"tool_call_update","toolCallId":"t-%d","status":"completed"}`, n))),
		frame(tm+3, trafficlog.A2C, update(`{"sessionUpdate":"tool_call","toolCallId":"call_0","title":"ls","kind":"execute","status":"pending","rawInput":{"command":"ls"}}`)),
		frame(tm+4, trafficlog.A2C, update(`{"sessionUpdate":"tool_call_update","toolCallId":"call_0","status":"completed"}`)),
		frame(tm+5, trafficlog.A2C, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`, id)),
	}
}

// runTurns decodes turns prompt turns and returns the call ids announced.
func runTurns(d *Decoder, from, turns int) []string {
	var ids []string
	for n := from; n < from+turns; n++ {
		for _, f := range turnFrames(n) {
			for _, ev := range d.Decode(f) {
				if c, ok := ev.(*agent.ToolCall); ok {
					ids = append(ids, c.CallID)
				}
			}
		}
	}
	return ids
}

// TestCallIDsUnique: a reused ACP id gets a new canonical id in each turn,
// and no two calls among the last RecentCallIDs share one.
func TestCallIDsUnique(t *testing.T) {
	d := NewDecoder()
	ids := runTurns(d, 0, 3)
	want := []string{"t-0", "call_0", "t-1", "call_0#2", "t-2", "call_0#3"}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("call ids %v, want %v", ids, want)
	}
	ids = runTurns(d, 3, RecentCallIDs)
	seen := map[string]bool{}
	for _, id := range ids[len(ids)-RecentCallIDs:] {
		if seen[id] {
			t.Fatalf("call id %s used twice among the last %d", id, RecentCallIDs)
		}
		seen[id] = true
	}
	if n := d.callIDs.len(); n != RecentCallIDs {
		t.Fatalf("%d call ids remembered, want %d", n, RecentCallIDs)
	}
}

// TestCallIDsFlatHeap: what a decoder holds after ten times as many turns
// is what it holds after one (the call id memory is bounded), measured as
// the live heap after a GC.
func TestCallIDsFlatHeap(t *testing.T) {
	const window = RecentCallIDs
	held := func(turns int) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d := NewDecoder()
		runTurns(d, 0, turns)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(d)
		if after.HeapAlloc < before.HeapAlloc {
			return 0
		}
		return after.HeapAlloc - before.HeapAlloc
	}
	// 1x: two calls a turn fill the call id memory four times over (its
	// map has reached its size); 10x would hold ten times as many ids (70
	// bytes each and more, megabytes) if it grew.
	held(window) // the first pass in a process holds less: not a baseline
	one, ten := held(2*window), held(20*window)
	t.Logf("held after %d turns: %d KB; after %d: %d KB", 2*window, one/1024, 20*window, ten/1024)
	if ten > one+one/4+16<<10 {
		t.Fatalf("held %d bytes after 10x the turns, %d after 1x: the decoder's memory grows with the session", ten, one)
	}
}

// TestRecentIDs: recentIDs answers as a plain bounded set (the last max
// ids added).
func TestRecentIDs(t *testing.T) {
	for _, max := range []int{1, 3, 31, 32, 33, 100} {
		r := newRecentIDs(max)
		var last []string // the reference: the last max ids added
		for i := range 300 {
			id := "id" + strconv.Itoa(i*7%151) // ids come back
			want := slices.Contains(last, id)
			if got := r.has(id); got != want {
				t.Fatalf("max %d, step %d: has(%q) = %v, want %v", max, i, id, got, want)
			}
			if want {
				continue
			}
			r.add(id)
			last = append(last, id)
			if len(last) > max {
				last = last[1:]
			}
			if r.len() != len(last) {
				t.Fatalf("max %d, step %d: len %d, want %d", max, i, r.len(), len(last))
			}
		}
	}
}
