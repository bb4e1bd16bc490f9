package acp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Errors of the file-system service.
var (
	// ErrOutsideFolder: the path is not inside the session's working folder
	// (relative, through "..", or through a symlink leading out).
	ErrOutsideFolder = errors.New("acp: path outside the session folder")
	// ErrTooLarge: the file is larger than the read limit.
	ErrTooLarge = errors.New("acp: file too large")
)

// DefaultMaxRead is the largest file fs/read_text_file returns (bytes).
const DefaultMaxRead = 16 << 20

// folder serves fs/read_text_file and fs/write_text_file inside one
// directory tree. Every access goes through an os.Root, so a symlink that
// leads out of the folder (or an absolute symlink) is refused at the
// moment of access, not only when the path is checked.
type folder struct {
	dir      string // the working folder as configured (absolute, clean)
	resolved string // the same with symlinks resolved
	root     *os.Root
	maxRead  int64
}

func openFolder(dir string, maxRead int64) (*folder, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("acp: working folder %q is not absolute", dir)
	}
	dir = filepath.Clean(dir)
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("acp: working folder: %w", err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("acp: open working folder: %w", err)
	}
	if maxRead <= 0 {
		maxRead = DefaultMaxRead
	}
	return &folder{dir: dir, resolved: resolved, root: r, maxRead: maxRead}, nil
}

func (f *folder) close() error { return f.root.Close() }

// rel turns an absolute path inside the folder into a path relative to it.
// Errors wrap ErrOutsideFolder.
func (f *folder) rel(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q is not an absolute path", ErrOutsideFolder, p)
	}
	p = filepath.Clean(p)
	for _, base := range []string{f.dir, f.resolved} {
		r, err := filepath.Rel(base, p)
		if err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return r, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrOutsideFolder, p)
}

// within checks that dir (absolute) is the folder or inside it.
func (f *folder) within(dir string) error {
	r, err := f.rel(dir)
	if err != nil {
		return err
	}
	st, err := f.root.Stat(r)
	if err != nil {
		return confine(err)
	}
	if !st.IsDir() {
		return fmt.Errorf("acp: %s is not a directory", dir)
	}
	return nil
}

// confine reports os.Root's refusals as ErrOutsideFolder.
func confine(err error) error {
	if err != nil && strings.Contains(err.Error(), "escapes from parent") {
		return fmt.Errorf("%w: %w", ErrOutsideFolder, err)
	}
	return err
}

// read returns the text of path, from 1-based line (0: the first) and at
// most limit lines (0: all). Errors: ErrOutsideFolder, ErrTooLarge,
// fs.ErrNotExist, or the read error.
func (f *folder) read(path string, line, limit int64) (string, error) {
	r, err := f.rel(path)
	if err != nil {
		return "", err
	}
	fh, err := f.root.Open(r)
	if err != nil {
		return "", confine(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("acp: %s is a directory", path)
	}
	if st.Size() > f.maxRead {
		return "", fmt.Errorf("%w: %s is %d bytes (limit %d)", ErrTooLarge, path, st.Size(), f.maxRead)
	}
	b, err := io.ReadAll(io.LimitReader(fh, f.maxRead+1))
	if err != nil {
		return "", err
	}
	if int64(len(b)) > f.maxRead {
		return "", fmt.Errorf("%w: %s (limit %d)", ErrTooLarge, path, f.maxRead)
	}
	text := string(b)
	if line <= 1 && limit <= 0 {
		return text, nil
	}
	lines := strings.SplitAfter(text, "\n")
	start := int(max(line, 1) - 1)
	if start >= len(lines) {
		return "", nil
	}
	end := len(lines)
	if limit > 0 && int64(end-start) > limit {
		end = start + int(limit)
	}
	return strings.Join(lines[start:end], ""), nil
}

// write replaces the text of path, creating it (and missing parent
// folders inside the working folder) when needed. It returns what was
// there before (nil when the file did not exist). Errors: ErrOutsideFolder
// or the write error.
func (f *folder) write(path, content string) (before *string, err error) {
	r, err := f.rel(path)
	if err != nil {
		return nil, err
	}
	if r == "." {
		return nil, fmt.Errorf("acp: %s is the working folder", path)
	}
	old, err := f.root.ReadFile(r)
	switch {
	case err == nil:
		s := string(old)
		before = &s
	case errors.Is(err, fs.ErrNotExist):
		if dir := filepath.Dir(r); dir != "." {
			if err := f.root.MkdirAll(dir, 0o755); err != nil {
				return nil, confine(err)
			}
		}
	default:
		return nil, confine(err)
	}
	if err := f.root.WriteFile(r, []byte(content), 0o644); err != nil {
		return nil, confine(err)
	}
	return before, nil
}
