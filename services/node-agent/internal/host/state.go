package host

import (
	"errors"
	"os"
	"path/filepath"
)

// ReadState reads the agent's state file; a missing file reads as nil.
func (h *Host) ReadState(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// WriteState replaces the state file atomically and durably: a crash leaves the old or the
// new state, never a torn one.
func (h *Host) WriteState(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MkdirAll creates a directory the agent owns.
func (h *Host) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o750) }
