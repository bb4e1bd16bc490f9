// Command npmpack writes happy's npm packages from a goreleaser dist folder,
// without Node: one package per platform carrying the binary (its "os" and
// "cpu" fields make npm install only the matching one) and a root package
// that lists them as optional dependencies and exposes `happy` through a
// small launcher (happy.js) that runs the platform package's binary. No
// package has an install script.
//
//	go run ./scripts/npmpack [-dist dist] [-out dist/npm]
//
// It reads dist/metadata.json (the version) and dist/artifacts.json (the
// binaries) and writes one .tgz per package into -out, named as `npm pack`
// names them (@happy-dev/happy-linux-x64 → happy-dev-happy-linux-x64-1.2.3.tgz),
// plus checksums.txt (SHA-256). Publish the platform packages first, then
// the root one.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// rootName is the root package's npm name; a platform package is named
// rootName-<os>-<cpu> with Node's names for both (process.platform,
// process.arch), which is what the launcher looks for.
const rootName = "@happy-dev/happy"

// repository is the package.json "repository" of every package.
const repository = "git+https://github.com/happy-dev/happy.git"

//go:embed happy.js
var launcher []byte

// npmOS and npmCPU map Go's GOOS and GOARCH to Node's process.platform and
// process.arch. Only these platforms get a package; the launcher tells
// others (Windows: use WSL) what to do.
var (
	npmOS  = map[string]string{"linux": "linux", "darwin": "darwin"}
	npmCPU = map[string]string{"amd64": "x64", "arm64": "arm64"}
)

// platforms is every GOOS/GOARCH pair that must have a binary in dist.
var platforms = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}

// tarTime is the modification time of every file in a package, the one
// `npm pack` uses, so that the same inputs give the same bytes.
var tarTime = time.Date(1985, 10, 26, 8, 15, 0, 0, time.UTC)

// semverRE is a semantic version (2.0.0) without a leading v, as npm
// requires in a package's "version".
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func main() {
	dist := flag.String("dist", "dist", "goreleaser's dist folder (with metadata.json and artifacts.json)")
	out := flag.String("out", "", "where to write the .tgz files (default DIST/npm)")
	flag.Parse()
	if *out == "" {
		*out = filepath.Join(*dist, "npm")
	}
	written, err := pack(*dist, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "npmpack:", err)
		os.Exit(1)
	}
	for _, p := range written {
		fmt.Println(p)
	}
}

// artifact is the part of a dist/artifacts.json entry npmpack reads.
type artifact struct {
	Path   string `json:"path"`
	Goos   string `json:"goos"`
	Goarch string `json:"goarch"`
	Type   string `json:"type"`
}

// file is one file of a package: its path below package/, mode and content.
type file struct {
	name string
	mode int64
	data []byte
}

// pack reads the release in dist and writes the npm packages into out,
// returning the paths written (tarballs, then checksums.txt). It fails,
// writing nothing, when the version is not a semantic version or a
// platform's binary is missing or doubled. A relative artifact path is
// taken relative to the folder that holds dist, where goreleaser ran.
func pack(dist, out string) ([]string, error) {
	version, err := readVersion(filepath.Join(dist, "metadata.json"))
	if err != nil {
		return nil, err
	}
	bins, err := readBinaries(filepath.Join(dist, "artifacts.json"), filepath.Dir(filepath.Clean(dist)))
	if err != nil {
		return nil, err
	}
	// Every package carries the licence (the repository's LICENSE, beside
	// dist where goreleaser ran), as the release archives do.
	license, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Clean(dist)), "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("the licence every package carries: %w", err)
	}
	type pkg struct {
		name  string
		files []file
	}
	var pkgs []pkg
	optional := map[string]string{}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		data, err := os.ReadFile(bins[p])
		if err != nil {
			return nil, fmt.Errorf("binary for %s: %w", p, err)
		}
		suffix := npmOS[goos] + "-" + npmCPU[goarch]
		name := rootName + "-" + suffix
		manifest, err := json.MarshalIndent(map[string]any{
			"name":            name,
			"version":         version,
			"description":     fmt.Sprintf("The happy binary for %s (%s/%s); installed by %s, which runs it", suffix, goos, goarch, rootName),
			"repository":      map[string]string{"type": "git", "url": repository},
			"license":         "MIT",
			"os":              []string{npmOS[goos]},
			"cpu":             []string{npmCPU[goarch]},
			"preferUnplugged": true,
		}, "", "  ")
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, pkg{name, []file{
			{"package.json", 0o644, append(manifest, '\n')},
			{"README.md", 0o644, []byte(fmt.Sprintf("# %s\n\nThe happy %s binary for %s. Install %s instead: it depends on this package on %s and runs its binary.\n", name, version, suffix, rootName, suffix))},
			{"LICENSE", 0o644, license},
			{"bin/happy", 0o755, data},
		}})
		optional[name] = version
	}
	manifest, err := json.MarshalIndent(map[string]any{
		"name":                 rootName,
		"version":              version,
		"description":          "happy wraps a coding agent (Claude Code, Codex, ACP agents) and pushes its end-to-end encrypted transcript to a relay, so a phone, a browser or another terminal can follow and control the session",
		"repository":           map[string]string{"type": "git", "url": repository},
		"license":              "MIT",
		"bin":                  map[string]string{"happy": "bin/happy.js"},
		"optionalDependencies": optional,
		"engines":              map[string]string{"node": ">=18"},
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	pkgs = append(pkgs, pkg{rootName, []file{
		{"package.json", 0o644, append(manifest, '\n')},
		{"README.md", 0o644, []byte(fmt.Sprintf("# %s\n\nhappy %s on npm: `npm install -g %s`, then `happy --version`.\nnpm installs the binary of your platform (%s) as an optional dependency; `happy` runs it.\nDocumentation: https://github.com/happy-dev/happy\n", rootName, version, rootName, strings.Join(sortedKeys(optional), ", ")))},
		{"LICENSE", 0o644, license},
		{"bin/happy.js", 0o755, launcher},
	}})

	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var written []string
	var sums strings.Builder
	for _, p := range pkgs {
		var buf bytes.Buffer
		if err := writeTarball(&buf, p.files); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		base := tarballName(p.name, version)
		path := filepath.Join(out, base)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(buf.Bytes())
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), base)
		written = append(written, path)
	}
	sumsPath := filepath.Join(out, "checksums.txt")
	if err := os.WriteFile(sumsPath, []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	return append(written, sumsPath), nil
}

// readVersion returns the "version" of goreleaser's metadata.json, which must
// be a semantic version.
func readVersion(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !semverRE.MatchString(meta.Version) {
		return "", fmt.Errorf("%s: version %q is not a semantic version (npm needs one, such as 1.2.3 or 1.2.4-snapshot.gabc1234)", path, meta.Version)
	}
	return meta.Version, nil
}

// readBinaries returns the path of the binary of every platform in
// platforms, from goreleaser's artifacts.json; relative paths are joined to
// base.
func readBinaries(path, base string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var arts []artifact
	if err := json.Unmarshal(raw, &arts); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	bins := map[string]string{}
	for _, a := range arts {
		if a.Type != "Binary" {
			continue
		}
		key := a.Goos + "/" + a.Goarch
		if _, ok := bins[key]; ok {
			return nil, fmt.Errorf("%s: two binaries for %s", path, key)
		}
		p := a.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		bins[key] = p
	}
	var missing []string
	for _, p := range platforms {
		if _, ok := bins[p]; !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: no binary for %s", path, strings.Join(missing, ", "))
	}
	return bins, nil
}

// writeTarball writes files as a gzipped tar with the package/ prefix npm
// expects, regular files only, owned by root, all dated tarTime.
func writeTarball(w io.Writer, files []file) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if f.name == "" || strings.HasPrefix(f.name, "/") || strings.Contains(f.name, "..") {
			return fmt.Errorf("bad file name %q", f.name)
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     "package/" + f.name,
			Mode:     f.mode,
			Size:     int64(len(f.data)),
			ModTime:  tarTime,
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return errors.Join(tw.Close(), zw.Close())
}

// tarballName is the file name `npm pack` gives a package's tarball.
func tarballName(name, version string) string {
	return strings.ReplaceAll(strings.TrimPrefix(name, "@"), "/", "-") + "-" + version + ".tgz"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
