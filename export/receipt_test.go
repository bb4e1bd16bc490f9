package export

import (
	"bytes"
	"strings"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

// The receipt line of a prompt from another device, for each step it has
// reached; a prompt typed where the agent runs has none.
func TestReceiptLine(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name string
		t    mapper.UserTime
		want string
	}{
		{"typed here", mapper.UserTime{Created: 1000}, ""},
		{"received", mapper.UserTime{Created: 1000, Received: ms(1000)}, "✓ stored · received"},
		{"handed", mapper.UserTime{Created: 1000, Received: ms(1000), Handed: ms(1100)}, "✓ stored · received · handed"},
		{"started", mapper.UserTime{Created: 1000, Received: ms(1000), Handed: ms(1100), Started: ms(2200)}, "✓ stored · received · started 1.2s later"},
		{"queued", mapper.UserTime{Created: 1000, Received: ms(1000), Handed: ms(31000), Started: ms(31500)}, "✓ stored · received · handed 30.0s later · started 30.5s later"},
		{"queued long", mapper.UserTime{Created: 1000, Received: ms(1000), Handed: ms(185_000)}, "✓ stored · received · handed 3m4s later"},
		{"clock went back", mapper.UserTime{Created: 1000, Received: ms(5000), Handed: ms(5000), Started: ms(4000)}, "✓ stored · received · started 0.0s later"},
	} {
		if got := ReceiptLine(c.t); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// happy log's text shows the receipt line under the prompt it is of.
func TestTextShowsReceipts(t *testing.T) {
	tr := exchange()
	um := tr.Messages[0].Info.(*mapper.UserMessage)
	received, handed, started := um.Time.Created+100, um.Time.Created+150, um.Time.Created+1300
	um.Time.Received, um.Time.Handed, um.Time.Started = &received, &handed, &started
	var buf, followed bytes.Buffer
	if err := Text(&buf, tr, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	// happy log -f writes the same line.
	if err := NewFollower(TextOptions{}).Update(&followed, tr, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(followed.String(), "> Create hello.txt with 'hello world'.\n  ✓ stored · received · started 1.2s later\n") {
		t.Fatalf("followed:\n%s", followed.String())
	}
	lines := strings.Split(buf.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "> ") {
			if i+1 >= len(lines) || lines[i+1] != "  ✓ stored · received · started 1.2s later" {
				t.Fatalf("after the prompt %q comes %q\n%s", l, lines[i+1], buf.String())
			}
			return
		}
	}
	t.Fatalf("no prompt line:\n%s", buf.String())
}
