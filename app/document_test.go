package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// happy log --json streamed writes what encoding/json wrote of the whole
// document, byte for byte.
func TestWriteTranscriptJSONIsTheDocument(t *testing.T) {
	conn, o := logSession(t, 500)
	ctx := context.Background()
	rb, _, err := ReadTranscript(ctx, conn, o, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rb.Transcript()); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	shell, err := WriteTranscriptJSON(ctx, conn, o, &got)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("streamed %d bytes, want %d:\n%.2000s", got.Len(), want.Len(), got.String())
	}
	if shell.Session.ID == "" || len(shell.Messages) != 0 || len(shell.Dropped) != 0 {
		t.Fatalf("the document's shell: session %q, %d messages, %d dropped", shell.Session.ID, len(shell.Messages), len(shell.Dropped))
	}
}

// The indenting writer writes what json.Indent writes, whatever pieces the
// compact JSON comes in: strings with quotes, backslashes and brackets,
// empty objects and arrays, nesting, numbers and literals.
func TestIndentWriterIsJSONIndent(t *testing.T) {
	doc := `{"a":"x\"}],{[\\","b":[],"c":{},"d":[1,-2.5e3,true,false,null,{"e":[[]],"f":"\u2028é"}],"g":{"h":{"i":[{}]}}}`
	var want bytes.Buffer
	if err := json.Indent(&want, []byte(doc), "", "  "); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 50; round++ {
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		iw := &indentWriter{w: bw}
		for rest := doc; rest != ""; {
			n := 1 + rng.IntN(min(len(rest), 7))
			if _, err := iw.Write([]byte(rest[:n])); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("round %d:\n%s\nwant\n%s", round, got.String(), want.String())
		}
	}
}
