package queue

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func drain[T any](q *Unbounded[T]) []T {
	var got []T
	for v := range q.Out() {
		got = append(got, v)
	}
	return got
}

func TestOrderAndDeliveryAfterClose(t *testing.T) {
	q := New[int]()
	// More than the Out buffer, pushed before anyone reads: Push must not block.
	want := make([]int, 0, 1000)
	for i := range 1000 {
		if !q.Push(i) {
			t.Fatalf("Push(%d) refused before Close", i)
		}
		want = append(want, i)
	}
	q.Close()
	if q.Push(-1) {
		t.Fatal("Push after Close was accepted")
	}
	got := drain(q)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d items, first mismatch vs want %d items", len(got), len(want))
	}
	q.Wait()
}

func TestPushNeverBlocksOnSlowConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[string]()
		pushed := make(chan struct{})
		go func() {
			for range 10 * outBuffer {
				q.Push("x")
			}
			close(pushed)
		}()
		synctest.Wait()
		select {
		case <-pushed:
		default:
			t.Fatal("producer is blocked while nobody reads Out")
		}
		if n := len(q.out); n != outBuffer {
			t.Fatalf("Out holds %d items while nobody reads, want a full buffer of %d", n, outBuffer)
		}
		q.Close()
		if got := len(drain(q)); got != 10*outBuffer {
			t.Fatalf("delivered %d, want %d", got, 10*outBuffer)
		}
	})
}

func TestConcurrentProducersKeepPerProducerOrder(t *testing.T) {
	q := New[[2]int]()
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				q.Push([2]int{p, i})
			}
		}()
	}
	go func() { wg.Wait(); q.Close() }()
	next := map[int]int{}
	for v := range q.Out() {
		if v[1] != next[v[0]] {
			t.Fatalf("producer %d: got item %d, want %d", v[0], v[1], next[v[0]])
		}
		next[v[0]]++
	}
	for p := range 4 {
		if next[p] != 500 {
			t.Fatalf("producer %d: delivered %d, want 500", p, next[p])
		}
	}
}

func TestEmptyPushAndDoubleClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[int]()
		q.Push()
		synctest.Wait()
		select {
		case v := <-q.Out():
			t.Fatalf("empty Push delivered %v", v)
		default:
		}
		q.Close()
		q.Close()
		if got := drain(q); len(got) != 0 {
			t.Fatalf("got %v after closing an empty queue", got)
		}
		<-q.Done()
	})
}

func BenchmarkPushReceive(b *testing.B) {
	q := New[int]()
	done := make(chan int)
	go func() {
		n := 0
		for range q.Out() {
			n++
		}
		done <- n
	}()
	for i := 0; b.Loop(); i++ {
		q.Push(i)
	}
	q.Close()
	<-done
}
