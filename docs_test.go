package arch_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Pointers into the docs: code comments and documents name a section of a
// document under docs/ by its heading ("docs/ARCHITECTURE.md, section
// \"Trust\"", "docs/protocol.md, \"Daemon\"", or `section "X"` inside a
// document for one of its own sections). Every such name must be a heading
// of that document, or a bold lead-in (**Name**) of one of its paragraphs.

var (
	// commentBreak joins a comment or paragraph that runs over several lines,
	// so a name cut by a line break reads whole.
	commentBreak = regexp.MustCompile(`[ \t]*\r?\n[ \t]*(?:/\*|//|#|\*)?[ \t]*`)
	// quoted is one or more section names: "A", "A" and "B", "A", "B".
	quoted = `((?:"[^"\n]{1,80}"(?:\s*,?\s*(?:and\s+)?)?)+)`
	// after is a pointer that names the document first.
	after = regexp.MustCompile(`(?:docs/)?([A-Za-z0-9_-]+)\.md[,:]?\s*\(?\s*(?:sections?\s+)?` + quoted)
	// before is a pointer that names the section first: section "X" of docs/D.md.
	before = regexp.MustCompile(`sections?\s+` + quoted + `\s*of\s+(?:docs/)?([A-Za-z0-9_-]+)\.md`)
	// own is a pointer inside a document to one of its own sections.
	own = regexp.MustCompile(`sections?\s+` + quoted)
	// name takes the names out of a quoted list.
	// ofDoc and namedDoc tell a pointer into a named document from one to
	// the document's own sections.
	ofDoc    = regexp.MustCompile(`^\s*of\s+`)
	namedDoc = regexp.MustCompile(`\.md[,:]?\s*\(?\s*$`)
	name     = regexp.MustCompile(`"([^"]+)"`)
	bold     = regexp.MustCompile(`\*\*([^*\n]+?)\.?\*\*`)
	header   = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
)

// sections returns the headings and bold lead-ins of every document under
// docs/, by document name without ".md".
func sections(t *testing.T) map[string][]string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	out := map[string][]string{}
	for _, p := range docs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		doc := strings.TrimSuffix(path.Base(filepath.ToSlash(p)), ".md")
		for _, m := range header.FindAllStringSubmatch(string(b), -1) {
			out[doc] = append(out[doc], m[1])
		}
		for _, m := range bold.FindAllStringSubmatch(string(b), -1) {
			out[doc] = append(out[doc], m[1])
		}
	}
	return out
}

func names(list string) []string {
	var out []string
	for _, m := range name.FindAllStringSubmatch(list, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestDocPointersNameSections(t *testing.T) {
	secs := sections(t)
	checked := 0
	check := func(file, doc, sec string) {
		checked++
		if !slices.Contains(secs[doc], sec) {
			t.Errorf("%s points at docs/%s.md, %q: no such section", file, doc, sec)
		}
	}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := path.Ext(p); ext != ".go" && ext != ".md" && ext != ".js" && d.Name() != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := commentBreak.ReplaceAllString(string(b), " ")
		p = filepath.ToSlash(p)
		for _, m := range after.FindAllStringSubmatch(text, -1) {
			if _, ok := secs[m[1]]; ok {
				for _, s := range names(m[2]) {
					check(p, m[1], s)
				}
			}
		}
		for _, m := range before.FindAllStringSubmatch(text, -1) {
			if _, ok := secs[m[2]]; ok {
				for _, s := range names(m[1]) {
					check(p, m[2], s)
				}
			}
		}
		if doc, ok := strings.CutPrefix(strings.TrimSuffix(p, ".md"), "docs/"); ok && path.Ext(p) == ".md" {
			for _, loc := range own.FindAllStringSubmatchIndex(text, -1) {
				if ofDoc.MatchString(text[loc[1]:]) || namedDoc.MatchString(text[:loc[0]]) {
					continue // a section of a named document: checked above
				}
				for _, s := range names(text[loc[2]:loc[3]]) {
					check(p, doc, s)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pointers checked", checked)
	if checked < 100 {
		t.Fatalf("only %d pointers found: the patterns no longer match how pointers are written", checked)
	}
}
