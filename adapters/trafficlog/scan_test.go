package trafficlog

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// Scan reports every non-blank line with its number: records decoded,
// bad lines with Decode's error and a drop reason, and a last line
// without its newline decoded like the others.
func TestScan(t *testing.T) {
	log := strings.Join([]string{
		`{"t":1,"dir":"a2c","msg":{"a":1}}`,
		``,
		`{"t":2,"dir":"a2c"`,
		`[1]`,
		`{"t":3,"dir":"sideways","msg":{}}`,
		`{"t":4,"dir":"c2a","msg":{"b":2}}`,
	}, "\n") // no newline at the end
	var got []string
	err := Scan(strings.NewReader(log), func(line int64, rec Record, err error, data []byte) {
		if err != nil {
			got = append(got, fmt.Sprintf("%d bad %s", line, DropReason(err)))
			return
		}
		got = append(got, fmt.Sprintf("%d %d %s %s", line, rec.T, rec.Dir, rec.Msg))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`1 1 a2c {"a":1}`,
		`3 bad ` + string(agent.DropUnparseableJSON),
		`4 bad ` + string(agent.DropNotAnObject),
		`5 bad ` + string(agent.DropUnknownType),
		`6 4 c2a {"b":2}`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if r := DropReason(errors.New("other")); r != agent.DropInvalidField {
		t.Fatalf("DropReason(other) = %q", r)
	}
}

// Scan never panics, reports either a record or an error for each line,
// and every error has a drop reason.
func FuzzScan(f *testing.F) {
	for _, s := range []string{"", "\n\n", `{"t":1,"dir":"a2c","msg":{}}`, "{\n[", `{"t":1,"dir":"x","msg":1}` + "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		last := int64(0)
		_ = Scan(strings.NewReader(s), func(line int64, rec Record, err error, data []byte) {
			if line <= last {
				t.Fatalf("line %d after %d", line, last)
			}
			last = line
			if err != nil && DropReason(err) == "" {
				t.Fatalf("no drop reason for %v", err)
			}
			if err == nil && !rec.Dir.Valid() {
				t.Fatalf("record with direction %q", rec.Dir)
			}
		})
	})
}
