package mapper

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/mapper/schema"
)

// addGoldenSeeds adds every golden transcript, and each of its messages and
// parts, to the fuzz corpus.
func addGoldenSeeds(f *testing.F, pick func(Transcript) [][]byte) {
	files, _ := filepath.Glob(filepath.Join("testdata", "model", "*.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		tr, _, err := DecodeTranscript(data)
		if err != nil {
			f.Fatal(err)
		}
		for _, b := range pick(tr) {
			f.Add(b)
		}
	}
}

func FuzzDecodeTranscript(f *testing.F) {
	addGoldenSeeds(f, func(tr Transcript) [][]byte {
		b, _ := EncodeTranscript(tr)
		return [][]byte{b}
	})
	f.Add([]byte(`{"session":{"id":"s","projectID":"","directory":"","title":"","time":{"created":0,"updated":0}},"messages":[{"info":{"id":"m","sessionID":"s","role":"user"},"parts":[]}],"children":[],"todos":[],"dropped":[]}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"session":`))
	v, err := schema.NewValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, rep, err := DecodeTranscript(data)
		if err != nil {
			return
		}
		b1, err := EncodeTranscript(tr)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		if err := v.Transcript(b1); err != nil {
			t.Fatalf("encoding does not match the schema: %v\n%s", err, b1)
		}
		tr2, rep2, err := DecodeTranscript(b1)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, b1)
		}
		if len(rep2.Refused) != 0 || rep2.IgnoredFields != 0 || rep2.UnknownParts != rep.UnknownParts {
			t.Fatalf("re-decode report %+v (first %+v)", rep2, rep)
		}
		b2, err := EncodeTranscript(tr2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("not byte-stable (%v):\n%s\n%s", err, b1, b2)
		}
	})
}

func FuzzDecodeMessageWithParts(f *testing.F) {
	addGoldenSeeds(f, func(tr Transcript) [][]byte {
		var out [][]byte
		for _, m := range tr.Messages {
			b, _ := EncodeMessageWithParts(m)
			out = append(out, b)
		}
		return out
	})
	f.Add([]byte(`{"info":{"id":"m","sessionID":"s","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"x"}},"parts":[1,{"type":"x"}]}`))
	v, err := schema.NewValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := DecodeMessageWithParts(data)
		if err != nil {
			return
		}
		b1, err := EncodeMessageWithParts(m)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		if err := v.MessageWithParts(b1); err != nil {
			t.Fatalf("encoding does not match the schema: %v\n%s", err, b1)
		}
		m2, rep, err := DecodeMessageWithParts(b1)
		if err != nil || len(rep.Refused) != 0 {
			t.Fatalf("re-decode: %v %+v", err, rep)
		}
		b2, err := EncodeMessageWithParts(m2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("not byte-stable (%v):\n%s\n%s", err, b1, b2)
		}
	})
}

func FuzzDecodePart(f *testing.F) {
	addGoldenSeeds(f, func(tr Transcript) [][]byte {
		var out [][]byte
		for _, m := range tr.Messages {
			for _, p := range m.Parts {
				b, _ := EncodePart(p)
				out = append(out, b)
			}
		}
		return out
	})
	f.Add([]byte(`{"id":"p","sessionID":"s","messageID":"m","type":"tool","callID":"c","tool":"t","state":{"status":"pending","input":[],"raw":""}}`))
	v, err := schema.NewValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePart(data)
		if err != nil {
			return
		}
		b1, err := EncodePart(p)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		if err := v.Part(b1); err != nil {
			t.Fatalf("encoding does not match the schema: %v\n%s", err, b1)
		}
		p2, err := DecodePart(b1)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		b2, err := EncodePart(p2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("not byte-stable (%v):\n%s\n%s", err, b1, b2)
		}
	})
}

func FuzzDecodeObject(f *testing.F) {
	f.Add([]byte(`{"a":1.50,"b":[true,null,"x"],"c":{"d":-0,"e":1e400},"a2":"\u2028<>"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"k":1,"k":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := DecodeObject(data)
		if err != nil {
			return
		}
		b1, err := EncodeObject(o)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		o2, err := DecodeObject(b1)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		b2, err := EncodeObject(o2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("not byte-stable (%v):\n%s\n%s", err, b1, b2)
		}
	})
}

func FuzzMatchWildcard(f *testing.F) {
	f.Add("src/api/server.ts", "src/**")
	f.Add("git log --oneline", "git log *")
	f.Add(`C:\a\b`, "C:/*/b")
	f.Fuzz(func(t *testing.T, s, pattern string) {
		got := MatchWildcard(s, pattern)
		if !MatchWildcard(s, "*") {
			t.Fatalf("%q does not match *", s)
		}
		// A leading star can match nothing, so it never loses a match.
		if got && !MatchWildcard(s, "*"+pattern) {
			t.Fatalf("%q matches %q but not %q", s, pattern, "*"+pattern)
		}
		if !got && MatchWildcard(s, pattern) {
			t.Fatal("not deterministic")
		}
	})
}
