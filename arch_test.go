// Package arch_test holds the house rules of the import graph, checked on
// every `make test` (docs/ARCHITECTURE.md, "Imports run one way").
package arch_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/happy-dev/happy"

// domain lists the packages (and their sub-packages) that know what happy
// is about; no package under internal/ may import them.
var domain = []string{"agent", "control", "adapters", "mapper", "session", "relay", "server", "crypto", "export", "cmd", "app", "localapi", "daemon", "webapp"}

// eachSourceFile calls fn with the path of every non-test Go file of the
// module (testdata, node_modules and hidden folders left out).
func eachSourceFile(t *testing.T, fn func(p string) error) {
	t.Helper()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		return fn(p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// imports returns, per package folder (relative to the module root), the
// module-local imports of its non-test Go files.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	eachSourceFile(t, func(p string) error {
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		for _, s := range f.Imports {
			ip, _ := strconv.Unquote(s.Path.Value)
			if rel, ok := strings.CutPrefix(ip, module+"/"); ok && !slices.Contains(out[dir], rel) {
				out[dir] = append(out[dir], rel)
			}
		}
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		return nil
	})
	return out
}

func under(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

func TestImportsRunOneWay(t *testing.T) {
	graph := imports(t)
	if len(graph) < 10 {
		t.Fatalf("found only %d packages; run from the module root", len(graph))
	}
	for pkg, deps := range graph {
		for _, dep := range deps {
			switch {
			case pkg == "agent":
				t.Errorf("agent imports %s: the agent contract imports nothing of ours", dep)
			case under(pkg, "adapters") && (under(dep, "session") || under(dep, "mapper") || under(dep, "relay") || under(dep, "server") || under(dep, "app") || under(dep, "cmd")):
				t.Errorf("%s imports %s: an adapter speaks only the agent vocabulary", pkg, dep)
			case under(pkg, "internal") && slices.ContainsFunc(domain, func(d string) bool { return under(dep, d) }):
				t.Errorf("%s imports %s: internal pieces know nothing of the domain", pkg, dep)
			case (under(pkg, "mapper") || under(pkg, "session")) && (under(dep, "adapters") || under(dep, "app") || under(dep, "cmd")):
				t.Errorf("%s imports %s: the model and the runner do not know the adapters or the commands", pkg, dep)
			case under(pkg, "localapi") && !under(dep, "localapi") && dep != "mapper" && dep != "agent" && !under(dep, "internal"):
				t.Errorf("%s imports %s: the local event API serves the model's changes and knows only mapper, agent and internal pieces", pkg, dep)
			case dep == "app" && !under(pkg, "cmd") && !under(pkg, "daemon"):
				t.Errorf("%s imports app: only the commands (and the daemon, wiring on top of it) use the wiring", pkg)
			case under(dep, "daemon") && !under(pkg, "cmd") && !under(pkg, "daemon"):
				t.Errorf("%s imports %s: only the commands use the daemon", pkg, dep)
			case under(pkg, "daemon") && (under(dep, "adapters") || under(dep, "cmd") || under(dep, "server")):
				t.Errorf("%s imports %s: the daemon starts happy itself, never an agent or the relay", pkg, dep)
			case under(pkg, "server/wstransport"):
				t.Errorf("%s imports %s: the relay's websocket transport knows nothing of the relay (it hears of it through wstransport.Reads)", pkg, dep)
			case under(pkg, "server/token") && !under(dep, "internal"):
				t.Errorf("%s imports %s: the relay's tokens know nothing of the relay (revocation is the relay's)", pkg, dep)
			case pkg == "relay/wire":
				t.Errorf("relay/wire imports %s: the relay contract's shapes import nothing of ours, so that server and relay both can", dep)
			case pkg == "webapp":
				t.Errorf("webapp imports %s: the web app's package only embeds its files", dep)
			case under(pkg, "crypto") && dep != "crypto" && !under(dep, "crypto"):
				t.Errorf("crypto imports %s: crypto is a leaf", dep)
			}
		}
	}
	// The rules above only mean something if the packages they name exist.
	for _, p := range []string{"agent", "mapper", "session", "adapters/claude", "app", "internal/queue", "localapi", "daemon", "webapp", "relay/wire", "server/wstransport", "server/token"} {
		if _, ok := graph[p]; !ok {
			t.Errorf("package %s not found", path.Clean(p))
		}
	}
}

// maxLines is the most lines a non-test Go file may have: a longer one is
// split along a real seam.
const maxLines = 1000

// No non-test Go file is longer than maxLines.
func TestNoFileOverMaxLines(t *testing.T) {
	eachSourceFile(t, func(p string) error {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := strings.Count(string(b), "\n"); n > maxLines {
			t.Errorf("%s has %d lines, more than %d: split it along a real seam", p, n, maxLines)
		}
		return nil
	})
}
