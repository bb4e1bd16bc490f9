package jsonrpc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// TestReadTraffic: frames come back decoded as a live connection decodes
// them, bad records become Dropped at their place with their line number,
// and Decode interleaves both.
func TestReadTraffic(t *testing.T) {
	log := `{"t":1,"dir":"c2a","msg":{"id":1,"method":"initialize"}}
not a record
{"t":2,"dir":"a2c","msg":"a line that was not JSON"}

{"t":3,"dir":"a2c","msg":{"id":1,"result":{}},"x":1}
{"t":4,"dir":"sideways","msg":{}}
{"t":5,"dir":"exit","msg":{"code":0,"sig":null}}`
	tr, err := ReadTraffic(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, f := range tr.Frames {
		text, isText := f.Text()
		kind := "-"
		if f.HasMsg() {
			kind = f.Msg.Kind.String()
		}
		got = append(got, fmt.Sprintf("%d:%s@%d %s text=%v %q", i, f.Dir, f.T, kind, isText, text))
	}
	want := []string{
		`0:c2a@1 request text=false ""`,
		`1:a2c@2 - text=true "a line that was not JSON"`,
		`2:a2c@3 response text=false ""`,
		`3:exit@5 - text=false ""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("frames:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var bad []string
	for i := 0; i <= len(tr.Frames); i++ {
		for _, d := range tr.Bad[i] {
			bad = append(bad, fmt.Sprintf("before %d: %s line %d %s", i, d.Source, d.Line, d.Reason))
		}
	}
	if got, want := strings.Join(bad, "; "), "before 1: traffic-log line 2 unparseable_json; before 3: traffic-log line 6 unknown_type"; got != want {
		t.Errorf("bad records: %s\nwant %s", got, want)
	}
	var order []string
	for _, e := range tr.Decode(func(f Frame) []agent.Event {
		return []agent.Event{&agent.TextDelta{Delta: string(f.Dir)}}
	}) {
		switch e := e.(type) {
		case *agent.TextDelta:
			order = append(order, e.Delta)
		case *agent.DroppedInput:
			order = append(order, fmt.Sprintf("dropped@%d", e.Dropped.Line))
		}
	}
	if got := strings.Join(order, " "); got != "c2a dropped@2 a2c a2c dropped@6 exit" {
		t.Errorf("decode order: %s", got)
	}
	if tr.LastT() != 5 {
		t.Errorf("last t = %d", tr.LastT())
	}
}

// FuzzReadTraffic: any input is read without panicking; every record is
// either a frame or a Dropped with a reason, and a2c/c2a frames carry a
// decoding or its error.
func FuzzReadTraffic(f *testing.F) {
	f.Add([]byte(`{"t":1,"dir":"a2c","msg":{"method":"n","params":{}}}` + "\n" + `{"t":2,"dir":"c2a","msg":[1]}`))
	f.Add([]byte(`{"t":1,"dir":"note","msg":"x"}` + "\n\n" + `{"t":"x"}`))
	f.Add([]byte("garbage\n{\"t\":1,\"dir\":\"exit\",\"msg\":null}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadTraffic(strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range tr.Frames {
			if (fr.Dir == trafficlog.A2C || fr.Dir == trafficlog.C2A) && !fr.HasMsg() == (fr.Err == nil) {
				t.Fatalf("frame %+v has neither or both of Msg and Err", fr)
			}
		}
		for _, ds := range tr.Bad {
			for _, d := range ds {
				if d.Reason == "" || d.Source != TrafficSource || d.Line <= 0 {
					t.Fatalf("bad record %+v", d)
				}
			}
		}
	})
}
