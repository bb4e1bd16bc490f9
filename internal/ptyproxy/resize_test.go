package ptyproxy

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type resizeEvent struct {
	TMs    int64  `json:"t_ms"`
	Source string `json:"source"`
	Cols   uint16 `json:"cols"`
	Rows   uint16 `json:"rows"`
}

type applied struct {
	AtMs int64
	Size Size
}

// replayResizes feeds events to a resizer on the bubble's fake clock and
// returns what it applied, and when (ms since the first event). Its sleeps,
// like those of the other resizer tests, run inside a synctest bubble: they
// advance the fake clock to the next event at once.
func replayResizes(t *testing.T, events []resizeEvent, view int) (initial Size, got []applied) {
	var mu sync.Mutex
	start := time.Now()
	initial = Size{Cols: events[0].Cols, Rows: events[0].Rows}
	r := newResizer(initial, 0, 0, func(s Size) {
		mu.Lock()
		got = append(got, applied{time.Since(start).Milliseconds(), s})
		mu.Unlock()
	})
	r.setView(view)
	for _, ev := range events[1:] {
		time.Sleep(time.Duration(ev.TMs)*time.Millisecond - time.Since(start))
		src := SourceLocal
		if ev.Source == "remote-viewport" {
			src = SourceRemote
		}
		r.offer(src, Size{Cols: ev.Cols, Rows: ev.Rows})
	}
	time.Sleep(2 * time.Second)
	synctest.Wait()
	r.stop()
	mu.Lock()
	defer mu.Unlock()
	return initial, append([]applied(nil), got...)
}

// TestB25ResizeEvents replays the B25 regression: the PTY starts at the
// size before the child starts (120x40), the remote burst 5000–5240 ms
// costs at most two resizes and leaves 120x40, a remote viewport never
// resizes a local session, 0x0 is ignored, 100x30 at 12000 ms is applied
// once.
func TestB25ResizeEvents(t *testing.T) {
	b, err := os.ReadFile("testdata/B25-resize-events.json")
	if err != nil {
		t.Fatal(err)
	}
	var events []resizeEvent
	if err := json.Unmarshal(b, &events); err != nil {
		t.Fatal(err)
	}
	for _, view := range []int{ViewLocal, ViewRemote} {
		t.Run(fmt.Sprint("view", view), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				initial, got := replayResizes(t, events, view)
				if initial != (Size{120, 40}) {
					t.Fatalf("initial size %v", initial)
				}
				var burst []applied
				var rest []applied
				for _, a := range got {
					if a.AtMs >= 5000 && a.AtMs < 9000 {
						burst = append(burst, a)
					} else {
						rest = append(rest, a)
					}
				}
				if view == ViewLocal && len(burst) != 0 {
					t.Fatalf("remote viewport resized a local session: %+v", burst)
				}
				if len(burst) > 2 {
					t.Fatalf("burst caused %d resizes: %+v", len(burst), burst)
				}
				if len(burst) > 0 && burst[len(burst)-1].Size != (Size{120, 40}) {
					t.Fatalf("burst ended at %v, want 120x40 (last value wins)", burst[len(burst)-1].Size)
				}
				want := []applied{{12000 + DefaultResizeDelay.Milliseconds(), Size{100, 30}}}
				if !reflect.DeepEqual(rest, want) {
					t.Fatalf("resizes outside the burst %+v, want %+v", rest, want)
				}
			})
		})
	}
}

func TestResizerCoalescesAndBoundsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []applied
		start := time.Now()
		r := newResizer(Size{80, 24}, 50*time.Millisecond, 200*time.Millisecond, func(s Size) {
			mu.Lock()
			got = append(got, applied{time.Since(start).Milliseconds(), s})
			mu.Unlock()
		})
		n := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
		// A drag: a new size every 30 ms, 25 times (0 to 720 ms).
		for i := range 25 {
			r.offer(SourceLocal, Size{uint16(81 + i), 24})
			time.Sleep(30 * time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		// Applied at most every 200 ms while dragging, and the last size
		// once it stops.
		want := []applied{{200, Size{87, 24}}, {410, Size{94, 24}}, {620, Size{101, 24}}, {770, Size{105, 24}}}
		mu.Lock()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("applied %+v, want %+v", got, want)
		}
		mu.Unlock()
		r.offer(SourceLocal, Size{105, 24}) // the current size: nothing to do
		r.offer(SourceLocal, Size{0, 24})   // never a zero size
		r.offer(SourceRemote, Size{10, 10}) // local view: remote ignored
		time.Sleep(time.Second)
		synctest.Wait()
		if n() != 4 || r.size() != (Size{105, 24}) {
			t.Fatalf("%d applied, size %v", n(), r.size())
		}
		r.stop()
		r.offer(SourceLocal, Size{120, 40})
		time.Sleep(time.Second)
		synctest.Wait()
		if n() != 4 {
			t.Fatalf("applied after stop: %d", n())
		}
	})
}
