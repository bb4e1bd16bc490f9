package acp

import (
	"strings"

	"github.com/happy-dev/happy/agent"
)

// fileDiff describes one file change in the transcript's FileDiff shape
// (before and after text, line counts, status added | modified). before
// is nil for a file that did not exist. Additions and deletions count the
// lines of the changed span: what lies between the lines the two versions
// share at their start and at their end. For the usual single-hunk edit
// that is the exact count; for scattered edits it counts the span once.
func fileDiff(path string, before *string, after string) agent.FileDiff {
	d := agent.FileDiff{File: path, After: after, Status: "modified"}
	if before == nil {
		d.Status = "added"
		d.Additions = len(splitLines(after))
		return d
	}
	d.Before = *before
	a, b := splitLines(*before), splitLines(after)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	d.Deletions = len(a) - pre - suf
	d.Additions = len(b) - pre - suf
	return d
}

// splitLines splits text into lines; a final newline does not start an
// empty line, and "" has no lines.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffObject renders FileDiffs as metadata values.
func diffObjects(ds []agent.FileDiff) []any {
	out := make([]any, 0, len(ds))
	for _, d := range ds {
		out = append(out, map[string]any{
			"file": d.File, "before": d.Before, "after": d.After,
			"additions": d.Additions, "deletions": d.Deletions, "status": d.Status,
		})
	}
	return out
}
