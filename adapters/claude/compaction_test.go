package claude

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Compaction in Claude's two record forms (testdata/compaction, written in
// the shape Claude Code 2.1.x gives a /compact and an automatic
// compaction): every compact_boundary record is a compaction part of its
// own, even one that reuses an earlier record's uuid, and what Claude writes
// around it (the /compact command wrapper, its output, the summary of the
// earlier conversation) is synthetic user text, never a typed prompt.
func TestCompactionRecords(t *testing.T) {
	cases := []struct {
		file      string
		auto      []bool   // the compaction parts, in order
		typed     []string // user text that is a prompt
		synthetic []string // user text the agent wrote (prefixes)
	}{
		{"session.jsonl", []bool{false, true},
			[]string{"Summarize the repository", "Now list the tests"},
			[]string{"This session is being continued", "<command-name>/compact</command-name>", "<local-command-stdout>", "This session is being continued"}},
		{"stdout.jsonl", []bool{false, false},
			nil,
			[]string{"This session is being continued", "<local-command-stdout>Compacted", "This session is being continued"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			evs, _ := replayEvents(t, filepath.Join("testdata", "compaction", c.file))
			red := mapper.NewReducer(mapper.Config{SessionID: "relay-compaction", ProviderID: ProviderID})
			for _, ev := range evs {
				red.Apply(ev)
			}
			tr := red.Transcript()
			if len(tr.Dropped) != 0 {
				t.Fatalf("dropped %+v", tr.Dropped)
			}
			var auto, typed, synthetic []string
			ids := map[string]bool{}
			for _, m := range tr.Messages {
				for _, p := range m.Parts {
					switch pt := p.(type) {
					case *mapper.CompactionPart:
						auto = append(auto, map[bool]string{true: "auto", false: "manual"}[pt.Auto])
						ids[pt.ID] = true
					case *mapper.TextPart:
						if _, user := m.Info.(*mapper.UserMessage); !user {
							continue
						}
						if pt.Synthetic {
							synthetic = append(synthetic, pt.Text)
						} else {
							typed = append(typed, pt.Text)
						}
					}
				}
			}
			var wantAuto []string
			for _, a := range c.auto {
				wantAuto = append(wantAuto, map[bool]string{true: "auto", false: "manual"}[a])
			}
			if !reflect.DeepEqual(auto, wantAuto) || len(ids) != len(c.auto) {
				t.Errorf("compaction parts %v (%d ids), want %v", auto, len(ids), wantAuto)
			}
			if !reflect.DeepEqual(typed, c.typed) {
				t.Errorf("typed prompts %q, want %q", typed, c.typed)
			}
			ok := len(synthetic) == len(c.synthetic)
			for i := 0; ok && i < len(synthetic); i++ {
				ok = strings.HasPrefix(synthetic[i], c.synthetic[i])
			}
			if !ok {
				t.Errorf("synthetic user text %q, want texts starting %q", synthetic, c.synthetic)
			}
		})
	}
}

// A boundary written twice, byte for byte, is one compaction: only a
// boundary with other content under a known uuid is a new one.
func TestCompactionBoundaryWrittenTwice(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "compaction", "session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	doubled := strings.Join(append(append(append([]string{}, lines[:4]...), lines[3]), lines[4:]...), "")
	var ids []string
	_, err = Replay(context.Background(), strings.NewReader(doubled), ReplayOptions{}, func(ev agent.Event) error {
		if c, ok := ev.(*agent.Compaction); ok {
			ids = append(ids, c.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c0000000-0000-4000-8000-00000000000c", "c0000000-0000-4000-8000-00000000000c#2"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("compaction ids %q, want %q", ids, want)
	}
}
