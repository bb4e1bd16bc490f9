// Package golden is the test helper for golden files: output of the code
// under test kept next to its input in testdata/, compared byte for byte,
// and rewritten with `go test ./pkg -update` when a change is intended (the
// diff is then reviewed like code).
//
// Layout: golden files live under the package's testdata/, named by the
// behaviour they pin. Check compares one file at any such path. A suite
// whose cases each have inputs of their own keeps one folder per case,
// testdata/<suite>/<case>/, with the input files and the expected output
// next to them (expected.json, or <form>.expected.json when one case is
// read in several forms); Cases runs one subtest per case folder.
//
// The package registers the -update flag, so it is imported by test files
// only, and a package using it defines no -update flag of its own.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/ with the current output")

// Update reports whether the test run was asked to rewrite golden files
// (-update).
func Update() bool { return *update }

// Check compares got with the golden file at path and fails t at the first
// differing line. With -update it writes got to path instead (creating the
// folder) and passes.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if d := Diff(want, got); d != "" {
		t.Errorf("%s differs (run the test with -update if the change is intended):\n%s", path, d)
	}
}

// Diff describes where got differs from want: the first differing line
// (1-based, each side cut to 600 bytes), or the line counts when one is a
// prefix of the other. It returns "" when they are equal.
func Diff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want: %.600s\n  got:  %.600s", i+1, w, g)
		}
	}
	return fmt.Sprintf("want %d lines, got %d", len(wl), len(gl))
}

// Indent returns a JSON document indented by two spaces with a final
// newline: the on-disk form of JSON golden files. It fails t when raw is
// not JSON.
func Indent(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatalf("indent golden JSON: %v", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// Cases runs fn as a subtest, named after the folder, for every case folder
// directly under dir (files such as a README are skipped). It fails t when
// there is none.
func Cases(t *testing.T, dir string, fn func(t *testing.T, dir string)) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) { fn(t, filepath.Join(dir, e.Name())) })
	}
	if n == 0 {
		t.Fatalf("no golden cases under %s", dir)
	}
}
