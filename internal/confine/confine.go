// Package confine gives other devices bounded access to one folder: every
// path is resolved inside the folder (no "..", no absolute path outside it,
// no symbolic link whose target leaves it), every read and listing is
// capped, and commands run in their own process group in the folder with a
// timeout that ends the whole group (docs/ARCHITECTURE.md, "Remote file and
// shell access").
//
// A path is checked twice: first resolved with filepath.EvalSymlinks and
// refused when its real location is outside the root, then opened through
// an os.Root (openat-style), so a link swapped in between the check and the
// open cannot lead outside either.
package confine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Errors of a confined operation. Every error a Root returns wraps one of
// them or an fs error (fs.ErrNotExist, …).
var (
	// ErrOutside: the path (or what a symbolic link on it points to) is
	// outside the root.
	ErrOutside = errors.New("path is outside the session folder")
	// ErrTooBig: a file is larger than the read cap.
	ErrTooBig = errors.New("file is too large")
	// ErrNotRegular: the path is not a regular file (a folder, a device, …).
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotDir: the path is not a folder.
	ErrNotDir = errors.New("not a folder")
	// ErrHashMismatch: writeFile's expected hash is not the file's.
	ErrHashMismatch = errors.New("file hash mismatch")
	// ErrExists: a write expected a new file and one exists.
	ErrExists = errors.New("file already exists but was expected to be new")
	// ErrBadPath: an empty path or one with a NUL byte.
	ErrBadPath = errors.New("bad path")
)

// Limits of a Root. Zero fields take the defaults below.
type Limits struct {
	// MaxReadBytes caps one file read (DefaultMaxReadBytes).
	MaxReadBytes int64
	// MaxWriteBytes caps one file write (DefaultMaxWriteBytes).
	MaxWriteBytes int64
	// MaxTreeEntries caps the nodes of one tree or listing (DefaultMaxTreeEntries).
	MaxTreeEntries int
	// MaxTreeDepth caps a tree's depth (DefaultMaxTreeDepth).
	MaxTreeDepth int
}

// Defaults of Limits.
const (
	DefaultMaxReadBytes   = 10 << 20
	DefaultMaxWriteBytes  = 10 << 20
	DefaultMaxTreeEntries = 5000
	DefaultMaxTreeDepth   = 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxReadBytes <= 0 {
		l.MaxReadBytes = DefaultMaxReadBytes
	}
	if l.MaxWriteBytes <= 0 {
		l.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if l.MaxTreeEntries <= 0 {
		l.MaxTreeEntries = DefaultMaxTreeEntries
	}
	if l.MaxTreeDepth <= 0 {
		l.MaxTreeDepth = DefaultMaxTreeDepth
	}
	return l
}

// Root is one confined folder. It is safe for concurrent use.
type Root struct {
	dir    string // the folder's real path (symbolic links resolved)
	root   *os.Root
	limits Limits
}

// Open confines access to dir, which must be an existing folder. The
// folder's own symbolic links are resolved once, here. Close releases it.
func Open(dir string, limits Limits) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("confine: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("confine: %w", err)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("confine: %w", err)
	}
	return &Root{dir: real, root: r, limits: limits.withDefaults()}, nil
}

// Dir is the root's real absolute path.
func (r *Root) Dir() string { return r.dir }

// Limits are the root's limits, defaults filled in.
func (r *Root) Limits() Limits { return r.limits }

// Close releases the root's folder handle.
func (r *Root) Close() error { return r.root.Close() }

// Rel resolves p, as another device names it (absolute, or relative to the
// root), to a path relative to the root with every symbolic link resolved.
// Errors: ErrBadPath, ErrOutside (lexically, or through a link). A path
// that does not exist yet is resolved through its deepest existing parent,
// so a new file can be named; its own absence is for the caller to find.
func (r *Root) Rel(p string) (string, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: %q", ErrBadPath, p)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.dir, abs)
	}
	abs = filepath.Clean(abs)
	if !within(r.dir, abs) {
		return "", fmt.Errorf("%w: %s", ErrOutside, p)
	}
	real, err := evalExisting(abs)
	if err != nil {
		return "", err
	}
	if !within(r.dir, real) {
		return "", fmt.Errorf("%w: %s (a symbolic link leads to %s)", ErrOutside, p, real)
	}
	rel, err := filepath.Rel(r.dir, real)
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrOutside, p)
	}
	return rel, nil
}

// Abs is Rel joined to the root: the real absolute path of p inside it.
func (r *Root) Abs(p string) (string, error) {
	rel, err := r.Rel(p)
	if err != nil {
		return "", err
	}
	return filepath.Join(r.dir, rel), nil
}

// evalExisting resolves the symbolic links of abs; when abs does not exist,
// those of its deepest existing parent, with the rest appended.
func evalExisting(abs string) (string, error) {
	var rest []string
	cur := abs
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", err
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	if p == dir {
		return true
	}
	if dir == string(filepath.Separator) {
		return strings.HasPrefix(p, dir)
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// ReadFile returns the content of the regular file p. Errors: those of Rel,
// ErrNotRegular, ErrTooBig (larger than Limits.MaxReadBytes), fs errors.
func (r *Root) ReadFile(p string) ([]byte, error) {
	rel, err := r.Rel(p)
	if err != nil {
		return nil, err
	}
	f, err := r.open(rel)
	if err != nil {
		return nil, rootErr(p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s", ErrNotRegular, p)
	}
	max := r.limits.MaxReadBytes
	if st.Size() > max {
		return nil, fmt.Errorf("%w: %s is %d bytes (at most %d are read)", ErrTooBig, p, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max { // it grew while read
		return nil, fmt.Errorf("%w: %s is more than %d bytes", ErrTooBig, p, max)
	}
	return b, nil
}

// Hash is the hash writeFile speaks: SHA-256 of the content, lower-case hex
// (the reference CLI's registerCommonHandlers.ts uses the same).
func Hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// WriteFile replaces (or creates) the regular file p with data and returns
// Hash(data). expected is the hash the writer last saw: nil means the file
// must not exist yet (ErrExists when it does); otherwise the current content
// must hash to *expected (ErrHashMismatch, or fs.ErrNotExist when there is
// no file). The parent folder must exist. The file is written to a
// temporary file in the same folder and renamed over p, so a reader never
// sees half of it. Errors: those of Rel, ErrTooBig (more than
// Limits.MaxWriteBytes), ErrNotRegular, fs errors.
func (r *Root) WriteFile(p string, data []byte, expected *string) (string, error) {
	if int64(len(data)) > r.limits.MaxWriteBytes {
		return "", fmt.Errorf("%w: %d bytes (at most %d are written)", ErrTooBig, len(data), r.limits.MaxWriteBytes)
	}
	rel, err := r.Rel(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("%w: %s", ErrNotRegular, p)
	}
	perm := os.FileMode(0o644)
	st, statErr := r.root.Lstat(rel)
	switch {
	case statErr == nil && !st.Mode().IsRegular():
		return "", fmt.Errorf("%w: %s", ErrNotRegular, p)
	case statErr == nil:
		perm = st.Mode().Perm()
		if expected == nil {
			return "", fmt.Errorf("%w: %s", ErrExists, p)
		}
		cur, err := r.ReadFile(p)
		if err != nil {
			return "", err
		}
		if h := Hash(cur); h != *expected {
			return "", fmt.Errorf("%w: expected %s, actual %s", ErrHashMismatch, *expected, h)
		}
	case errors.Is(statErr, fs.ErrNotExist):
		if expected != nil {
			return "", fmt.Errorf("%w: %s does not exist but a hash was given", fs.ErrNotExist, p)
		}
	default:
		return "", rootErr(p, statErr)
	}
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".happy-tmp")
	f, err := r.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return "", rootErr(p, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = r.root.Rename(tmp, rel)
	}
	if werr != nil {
		_ = r.root.Remove(tmp)
		return "", rootErr(p, werr)
	}
	return Hash(data), nil
}

// open opens rel for reading without blocking: a FIFO (or a device) named
// by the caller is refused after the open instead of holding the call.
func (r *Root) open(rel string) (*os.File, error) {
	return r.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// rootErr names the refusals os.Root gives for an escape as ErrOutside.
func rootErr(p string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%w: %s", ErrOutside, p)
	}
	return err
}

// Entry is one member of a folder listing. Type is "file", "directory" or
// "other" (a link, a device, …: links are not followed); Size is bytes and
// Modified Unix milliseconds, both absent when the entry could not be
// read. The shape is the reference app's listDirectory entry.
type Entry struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Size     *int64 `json:"size,omitempty"`
	Modified *int64 `json:"modified,omitempty"`
}

// List lists folder p: folders first, then the rest, each by name, at most
// Limits.MaxTreeEntries (truncated reports that more were left off).
// Errors: those of Rel, ErrNotDir, fs errors.
func (r *Root) List(p string) (entries []Entry, truncated bool, err error) {
	rel, err := r.Rel(p)
	if err != nil {
		return nil, false, err
	}
	des, err := r.readDir(p, rel)
	if err != nil {
		return nil, false, err
	}
	if len(des) > r.limits.MaxTreeEntries {
		des, truncated = des[:r.limits.MaxTreeEntries], true
	}
	entries = make([]Entry, 0, len(des))
	for _, de := range des {
		e := Entry{Name: de.Name(), Type: kind(de.Type())}
		if info, err := de.Info(); err == nil {
			size, mod := info.Size(), info.ModTime().UnixMilli()
			e.Size, e.Modified = &size, &mod
		}
		entries = append(entries, e)
	}
	return entries, truncated, nil
}

// readDir reads folder rel, sorted folders first then by name.
func (r *Root) readDir(p, rel string) ([]fs.DirEntry, error) {
	d, err := r.open(rel)
	if err != nil {
		return nil, rootErr(p, err)
	}
	defer d.Close()
	st, err := d.Stat()
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNotDir, p)
	}
	des, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(des, func(a, b fs.DirEntry) int {
		if ad, bd := a.IsDir(), b.IsDir(); ad != bd {
			if ad {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name(), b.Name())
	})
	return des, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

// Node is one node of a folder tree: Path is absolute (as the reference
// app's getDirectoryTree node has it), Type "file" or "directory",
// Children present on folders read within the depth.
type Node struct {
	Name     string  `json:"name"`
	Path     string  `json:"path"`
	Type     string  `json:"type"`
	Size     int64   `json:"size"`
	Modified int64   `json:"modified"`
	Children []*Node `json:"children,omitempty"`
}

// Tree returns the tree below p down to depth levels (capped at
// Limits.MaxTreeDepth; 0 is p alone), at most Limits.MaxTreeEntries nodes
// in all (truncated reports that some were left off). Symbolic links and
// other non-regular entries are skipped, as the reference does. Errors:
// those of Rel, fs errors of p itself (unreadable children are skipped).
func (r *Root) Tree(p string, depth int) (tree *Node, truncated bool, err error) {
	rel, err := r.Rel(p)
	if err != nil {
		return nil, false, err
	}
	if depth < 0 {
		return nil, false, fmt.Errorf("%w: maxDepth must be non-negative", ErrBadPath)
	}
	depth = min(depth, r.limits.MaxTreeDepth)
	st, err := r.root.Stat(rel)
	if err != nil {
		return nil, false, rootErr(p, err)
	}
	name := filepath.Base(filepath.Join(r.dir, rel))
	root := &Node{Name: name, Path: filepath.Join(r.dir, rel), Type: "file", Size: st.Size(), Modified: st.ModTime().UnixMilli()}
	budget := r.limits.MaxTreeEntries - 1
	if st.IsDir() {
		root.Type = "directory"
		truncated = r.fill(root, rel, depth, &budget)
	}
	return root, truncated, nil
}

// fill reads the children of n (folder rel) down to depth; false when the
// budget of nodes ran out.
func (r *Root) fill(n *Node, rel string, depth int, budget *int) (truncated bool) {
	if depth == 0 {
		return false
	}
	des, err := r.readDir(rel, rel)
	if err != nil {
		return false
	}
	n.Children = []*Node{}
	for _, de := range des {
		t := de.Type()
		if !t.IsDir() && !t.IsRegular() {
			continue
		}
		if *budget <= 0 {
			return true
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		*budget--
		crel := filepath.Join(rel, de.Name())
		c := &Node{Name: de.Name(), Path: filepath.Join(r.dir, crel), Type: kind(t), Size: info.Size(), Modified: info.ModTime().UnixMilli()}
		n.Children = append(n.Children, c)
		if t.IsDir() && r.fill(c, crel, depth-1, budget) {
			truncated = true
		}
	}
	return truncated
}
