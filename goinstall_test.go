package arch_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// moduleFiles returns the files (slash-separated paths from the module
// root) that a module zip made from the tracked files of this checkout
// holds, and those it leaves out, each with the reason. The rules are cmd/go's (golang.org/x/mod/zip, for a go.mod of
// go 1.24 or later), as the module proxy applies them to a tag: a file in
// a folder with its own go.mod (another module) and a file in a
// subfolder of a folder named vendor are left out, as is anything not a
// regular file (a symbolic link). It fails when git cannot list the
// tracked files.
func moduleFiles(t *testing.T) (kept []string, omitted []string) {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "-z", "--cached").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var paths []string
	for p := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		paths = append(paths, p)
	}
	nested := map[string]bool{}
	for _, p := range paths {
		if path.Base(p) == "go.mod" && p != "go.mod" {
			nested[path.Dir(p)] = true
		}
	}
	for _, p := range paths {
		info, err := os.Lstat(filepath.FromSlash(p))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case inNestedModule(p, nested):
			omitted = append(omitted, p+" (in another module)")
		case isVendored(p):
			omitted = append(omitted, p+" (in a vendor folder's subfolder)")
		case !info.Mode().IsRegular():
			omitted = append(omitted, p+" (not a regular file)")
		default:
			kept = append(kept, p)
		}
	}
	return kept, omitted
}

// inNestedModule reports whether p lies in one of the folders (module
// roots other than this one) in nested.
func inNestedModule(p string, nested map[string]bool) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if nested[d] {
			return true
		}
	}
	return false
}

// isVendored is x/mod/zip's isVendoredPackage for go 1.24 and later: a
// file below vendor/ or below a /vendor/ folder, but not directly in it.
func isVendored(p string) bool {
	var rest string
	if after, ok := strings.CutPrefix(p, "vendor/"); ok {
		rest = after
	} else if i := strings.Index(p, "/vendor/"); i >= 0 {
		rest = p[i+len("/vendor/"):]
	} else {
		return false
	}
	return p == "vendor/modules.txt" || strings.Contains(rest, "/")
}

// TestModuleZipKeepsEveryFile: the module that `go install …@latest`
// downloads from the module proxy holds every tracked file, so the
// binary it builds embeds what a clone's does (the web app's libraries
// among them). cmd/go leaves a vendor folder's subfolders out of a module.
func TestModuleZipKeepsEveryFile(t *testing.T) {
	kept, omitted := moduleFiles(t)
	if len(omitted) > 0 {
		t.Errorf("the module zip would leave out %d tracked files:\n%s", len(omitted), strings.Join(omitted, "\n"))
	}
	for _, p := range []string{"go.mod", "go.sum", "LICENSE", "cmd/happy/main.go"} {
		if !slices.Contains(kept, p) {
			t.Errorf("the module zip lacks %s", p)
		}
	}
}

// TestIsVendored: x/mod/zip's cases, and this module's web app libraries'
// old place.
func TestIsVendored(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{"vendor/modules.txt", true},
		{"vendor/a.go", false},
		{"vendor/x/a.go", true},
		{"pkg/vendor/vendor.go", false},
		{"pkg/vendor/foo/foo.go", true},
		{"webapp/static/vendor/tweetnacl-1.0.3/nacl-fast.min.js", true},
		{"webapp/static/lib/tweetnacl-1.0.3/nacl-fast.min.js", false},
		{"vendors/x/a.go", false},
	} {
		if got := isVendored(c.path); got != c.want {
			t.Errorf("isVendored(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

// TestGoInstallLatest runs the README's one-liner for Go users, `go install
// github.com/happy-dev/happy/cmd/happy@latest`, against this checkout served
// as the module's only version (a fresh v0.0.0-test.N each run) by a
// file:// module proxy, with nothing fetched from elsewhere: the
// dependencies come from the module cache (which `go mod download` fills),
// no checksum database is asked (go.sum in the module zip still checks
// every dependency) and the local toolchain builds, with CGO_ENABLED=0 and
// -trimpath as `make install` does. The installed happy
// must report that version. The served version's files are removed from
// the module cache afterwards. Skipped when there is no go command.
func TestGoInstallLatest(t *testing.T) {
	// go test puts its own GOROOT/bin first on the PATH of the tests.
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	modcache := goEnv(t, goCmd, "GOMODCACHE")
	version := fmt.Sprintf("v0.0.0-test.%d", time.Now().UnixNano())
	files, _ := moduleFiles(t)

	proxy := t.TempDir()
	writeProxy(t, proxy, version, files)
	t.Cleanup(keepModcache(t, modcache, version))

	gobin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "install", module+"/cmd/happy@latest")
	cmd.Dir = t.TempDir() // outside this module
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy),
		"GOSUMDB=off",
		"GONOSUMDB=",
		"GOPRIVATE=",
		// Built as `make install` and the release build it (static, no
		// local paths), which also lets the dependencies come from the
		// build cache those leave.
		"CGO_ENABLED=0",
		"GOFLAGS=-mod=mod -trimpath",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOMODCACHE="+modcache,
		"GOBIN="+gobin,
	)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/happy@latest: %v\n%s", module, err, out)
	}
	t.Logf("go install took %s", time.Since(start).Round(time.Millisecond))

	out, err := exec.Command(filepath.Join(gobin, "happy"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("happy --version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "happy "+strings.TrimPrefix(version, "v"); got != want {
		t.Errorf("happy --version printed %q, want %q", got, want)
	}
}

// goEnv returns `go env NAME`.
func goEnv(t *testing.T, goCmd, name string) string {
	t.Helper()
	out, err := exec.Command(goCmd, "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		t.Fatalf("go env %s is empty", name)
	}
	return v
}

// writeProxy writes a module proxy's files for this module at version
// into dir (the GOPROXY protocol's layout): @v/list naming only version,
// its .info, .mod (go.mod) and .zip (files, read from this checkout,
// under module@version/).
func writeProxy(t *testing.T, dir, version string, files []string) {
	t.Helper()
	at := filepath.Join(dir, filepath.FromSlash(module), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for _, p := range files {
		data, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(module + "@" + version + "/" + p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]string{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  gomod,
		version + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// keepModcache returns a function that deletes what cmd/go will have
// stored of this module at version in the module cache modcache: the
// extracted tree (read-only as cmd/go leaves it), the downloaded files and
// the version list it copied from the proxy (put back as it was now), then
// the module's folders if that left them empty.
func keepModcache(t *testing.T, modcache, version string) func() {
	t.Helper()
	tree := filepath.Join(modcache, filepath.FromSlash(module)+"@"+version)
	dl := filepath.Join(modcache, "cache", "download", filepath.FromSlash(module), "@v")
	list := filepath.Join(dl, "list")
	oldList, err := os.ReadFile(list)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	hadList := err == nil
	return func() {
		_ = filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(tree); err != nil {
			t.Errorf("module cache: %v", err)
		}
		matches, _ := filepath.Glob(filepath.Join(dl, version+".*"))
		for _, m := range matches {
			if err := os.Remove(m); err != nil {
				t.Errorf("module cache: %v", err)
			}
		}
		if hadList {
			err = os.WriteFile(list, oldList, 0o644)
		} else {
			err = os.Remove(list)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("module cache: %v", err)
		}
		// Remove leaves a folder that is not empty in place.
		for _, d := range []string{dl, filepath.Dir(dl), filepath.Dir(tree)} {
			_ = os.Remove(d)
		}
	}
}
