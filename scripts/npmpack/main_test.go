package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeDist writes a goreleaser dist folder with the given version and one
// binary (its content names its platform) per pair in plats, with artifact
// paths relative to the folder above dist, as goreleaser writes them, and a
// LICENSE beside dist.
func fakeDist(t *testing.T, version string, plats []string) string {
	t.Helper()
	root := t.TempDir()
	dist := filepath.Join(root, "dist")
	if err := os.MkdirAll(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "LICENSE"), []byte(testLicense), 0o644); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(map[string]string{"project_name": "happy", "version": version, "tag": "v" + version})
	var arts []map[string]any
	for _, p := range plats {
		goos, goarch, _ := strings.Cut(p, "/")
		rel := filepath.Join("dist", "happy_"+goos+"_"+goarch, "happy")
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte("binary "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		arts = append(arts,
			map[string]any{"name": "happy", "path": rel, "goos": goos, "goarch": goarch, "type": "Binary"},
			map[string]any{"name": "happy_" + goos + ".tar.gz", "path": "dist/happy_" + goos + ".tar.gz", "goos": goos, "goarch": goarch, "type": "Archive"})
	}
	artJSON, _ := json.Marshal(arts)
	if err := os.WriteFile(filepath.Join(dist, "metadata.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, "artifacts.json"), artJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	return dist
}

// entry is one file read back from a tarball.
type entry struct {
	mode int64
	data string
}

func readTarball(t *testing.T, path string) (map[string]entry, []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]entry{}
	var order []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg || !hdr.ModTime.Equal(tarTime) || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("%s: %s: type %c, time %v, owner %d:%d; want a regular file dated %v owned by 0:0", path, hdr.Name, hdr.Typeflag, hdr.ModTime, hdr.Uid, hdr.Gid, tarTime)
		}
		data, _ := io.ReadAll(tr)
		files[hdr.Name] = entry{hdr.Mode, string(data)}
		order = append(order, hdr.Name)
	}
	return files, order
}

// testLicense is the LICENSE fakeDist writes.
const testLicense = "MIT License\n\nCopyright (c) 2026 The happy authors\n"

func TestPackWritesPlatformAndRootPackages(t *testing.T) {
	dist := fakeDist(t, "1.2.3", []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"})
	out := t.TempDir()
	written, err := pack(dist, out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range written {
		names = append(names, filepath.Base(p))
	}
	wantNames := []string{
		"happy-dev-happy-darwin-x64-1.2.3.tgz",
		"happy-dev-happy-darwin-arm64-1.2.3.tgz",
		"happy-dev-happy-linux-x64-1.2.3.tgz",
		"happy-dev-happy-linux-arm64-1.2.3.tgz",
		"happy-dev-happy-1.2.3.tgz",
		"checksums.txt",
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("written %q, want %q", names, wantNames)
	}

	plat := []struct{ goos, goarch, os, cpu string }{
		{"darwin", "amd64", "darwin", "x64"},
		{"darwin", "arm64", "darwin", "arm64"},
		{"linux", "amd64", "linux", "x64"},
		{"linux", "arm64", "linux", "arm64"},
	}
	for _, p := range plat {
		files, order := readTarball(t, filepath.Join(out, "happy-dev-happy-"+p.os+"-"+p.cpu+"-1.2.3.tgz"))
		if want := []string{"package/package.json", "package/README.md", "package/LICENSE", "package/bin/happy"}; !reflect.DeepEqual(order, want) {
			t.Errorf("%s/%s: entries %q, want %q", p.goos, p.goarch, order, want)
		}
		if bin := files["package/bin/happy"]; bin.data != "binary "+p.goos+"/"+p.goarch || bin.mode != 0o755 {
			t.Errorf("%s/%s: bin/happy = %q mode %o, want %q mode 755", p.goos, p.goarch, bin.data, bin.mode, "binary "+p.goos+"/"+p.goarch)
		}
		var manifest map[string]any
		if err := json.Unmarshal([]byte(files["package/package.json"].data), &manifest); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"name":            "@happy-dev/happy-" + p.os + "-" + p.cpu,
			"version":         "1.2.3",
			"description":     "The happy binary for " + p.os + "-" + p.cpu + " (" + p.goos + "/" + p.goarch + "); installed by @happy-dev/happy, which runs it",
			"repository":      map[string]any{"type": "git", "url": "git+https://github.com/happy-dev/happy.git"},
			"license":         "MIT",
			"os":              []any{p.os},
			"cpu":             []any{p.cpu},
			"preferUnplugged": true,
		}
		if !reflect.DeepEqual(manifest, want) {
			t.Errorf("%s/%s package.json:\n got %v\nwant %v", p.goos, p.goarch, manifest, want)
		}
	}

	files, order := readTarball(t, filepath.Join(out, "happy-dev-happy-1.2.3.tgz"))
	if want := []string{"package/package.json", "package/README.md", "package/LICENSE", "package/bin/happy.js"}; !reflect.DeepEqual(order, want) {
		t.Errorf("root: entries %q, want %q", order, want)
	}
	if js := files["package/bin/happy.js"]; js.data != string(launcher) || js.mode != 0o755 || !strings.HasPrefix(js.data, "#!/usr/bin/env node\n") {
		t.Errorf("root: bin/happy.js mode %o, not the launcher with a node shebang", js.mode)
	}
	var manifest map[string]any
	if err := json.Unmarshal([]byte(files["package/package.json"].data), &manifest); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scripts", "dependencies", "files"} {
		if _, ok := manifest[k]; ok {
			t.Errorf("root package.json has %q; install scripts and dependencies are not wanted", k)
		}
	}
	if got, want := manifest["bin"], map[string]any{"happy": "bin/happy.js"}; !reflect.DeepEqual(got, want) {
		t.Errorf("root bin = %v, want %v", got, want)
	}
	wantOpt := map[string]any{
		"@happy-dev/happy-darwin-arm64": "1.2.3",
		"@happy-dev/happy-darwin-x64":   "1.2.3",
		"@happy-dev/happy-linux-arm64":  "1.2.3",
		"@happy-dev/happy-linux-x64":    "1.2.3",
	}
	if got := manifest["optionalDependencies"]; !reflect.DeepEqual(got, wantOpt) {
		t.Errorf("root optionalDependencies = %v, want %v", got, wantOpt)
	}
	if files["package/LICENSE"].data != testLicense || manifest["license"] != "MIT" {
		t.Errorf("root: LICENSE %q, license %v", files["package/LICENSE"].data, manifest["license"])
	}
	if manifest["name"] != "@happy-dev/happy" || manifest["version"] != "1.2.3" {
		t.Errorf("root name, version = %v, %v", manifest["name"], manifest["version"])
	}

	sums, err := os.ReadFile(filepath.Join(out, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("checksums.txt has %d lines, want 5:\n%s", len(lines), sums)
	}
	for i, line := range lines {
		raw, err := os.ReadFile(filepath.Join(out, wantNames[i]))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		if want := hex.EncodeToString(sum[:]) + "  " + wantNames[i]; line != want {
			t.Errorf("checksums.txt line %d = %q, want %q", i+1, line, want)
		}
	}
}

func TestPackIsReproducible(t *testing.T) {
	dist := fakeDist(t, "1.2.4-snapshot.g0abc123", platforms)
	a, b := t.TempDir(), t.TempDir()
	if _, err := pack(dist, a); err != nil {
		t.Fatal(err)
	}
	if _, err := pack(dist, b); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"happy-dev-happy-1.2.4-snapshot.g0abc123.tgz", "happy-dev-happy-linux-x64-1.2.4-snapshot.g0abc123.tgz", "checksums.txt"} {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs on the same dist", name)
		}
	}
}

func TestPackRefusesBadReleases(t *testing.T) {
	cases := []struct {
		name    string
		version string
		plats   []string
		wantErr string
	}{
		{"tag with v", "v1.2.3", platforms, `version "v1.2.3" is not a semantic version`},
		{"leading zero in prerelease", "1.2.3-01", platforms, `version "1.2.3-01" is not a semantic version`},
		{"no darwin arm64", "1.2.3", []string{"darwin/amd64", "linux/amd64", "linux/arm64"}, "no binary for darwin/arm64"},
		{"no binaries", "1.2.3", nil, "no binary for darwin/amd64, darwin/arm64, linux/amd64, linux/arm64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "npm")
			_, err := pack(fakeDist(t, tc.version, tc.plats), out)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("pack error = %v, want one containing %q", err, tc.wantErr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("pack wrote %s although it failed", out)
			}
		})
	}
}

func TestPackRefusesTwoBinariesForOnePlatform(t *testing.T) {
	dist := fakeDist(t, "1.2.3", platforms)
	raw, err := os.ReadFile(filepath.Join(dist, "artifacts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var arts []map[string]any
	if err := json.Unmarshal(raw, &arts); err != nil {
		t.Fatal(err)
	}
	arts = append(arts, map[string]any{"path": "dist/other/happy", "goos": "linux", "goarch": "amd64", "type": "Binary"})
	raw, _ = json.Marshal(arts)
	if err := os.WriteFile(filepath.Join(dist, "artifacts.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pack(dist, t.TempDir()); err == nil || !strings.Contains(err.Error(), "two binaries for linux/amd64") {
		t.Fatalf("pack error = %v, want two binaries for linux/amd64", err)
	}
}
