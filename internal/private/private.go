// Package private creates the files and folders happy writes so that only
// the user can read them: files 0600, folders 0700. The modes are set
// outright, so neither the process's umask (which can only take bits
// away) nor the mode an existing file or folder had leaves them readable
// by other local users (docs/ARCHITECTURE.md, "Trust"). Every file happy
// writes goes through it, or through a temporary file (os.CreateTemp
// makes 0600) renamed into place.
package private

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Modes of what happy writes.
const (
	FileMode fs.FileMode = 0o600
	DirMode  fs.FileMode = 0o700
)

// MkdirAll creates dir and every missing parent with mode 0700. Folders
// that exist are left as they are (a parent such as ~/.config is not
// happy's to change); use Dir for a folder that is happy's own.
func MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create folder %s: %w", dir, err)
	}
	return nil
}

// Dir is MkdirAll that also makes dir itself 0700 when it already
// existed with another mode: for happy's own folders (its home, its logs,
// its outbox, a relay's data folder).
func Dir(dir string) error {
	if err := MkdirAll(dir); err != nil {
		return err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("create folder %s: %w", dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("create folder %s: %w", dir, fs.ErrExist)
	}
	if info.Mode().Perm() != DirMode {
		if err := os.Chmod(dir, DirMode); err != nil {
			return fmt.Errorf("restrict folder %s to its owner: %w", dir, err)
		}
	}
	return nil
}

// OpenFile opens path with flag (os.O_* bits), creating it with mode 0600
// when flag has os.O_CREATE, and makes a file it did not create 0600 too
// (only when flag opens it for writing: a reader changes nothing).
func OpenFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, FileMode)
	if err != nil {
		return nil, err
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		if err := restrict(f); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return f, nil
}

// Create creates or truncates path for writing, mode 0600.
func Create(path string) (*os.File, error) {
	return OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
}

// OpenAppend opens path for appending, creating it; mode 0600.
func OpenAppend(path string) (*os.File, error) {
	return OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND)
}

// WriteFile writes data to path (created or truncated), mode 0600.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// Restrict makes the file at path 0600 (for a file another library
// created, such as a database). A missing file is not an error.
func Restrict(path string) error {
	err := os.Chmod(path, FileMode)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restrict %s to its owner: %w", path, err)
	}
	return nil
}

// restrict makes an open file 0600 unless it already is.
func restrict(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("restrict %s to its owner: %w", f.Name(), err)
	}
	if info.Mode().Perm() == FileMode {
		return nil
	}
	if err := f.Chmod(FileMode); err != nil {
		return fmt.Errorf("restrict %s to its owner: %w", f.Name(), err)
	}
	return nil
}
