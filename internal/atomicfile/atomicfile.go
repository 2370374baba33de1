// Package atomicfile writes a file so that a crash leaves either the old
// file or the whole new one, and the new one is on disk before the write
// returns: the data to a temporary file in the same directory, fsynced,
// renamed over the target, and the directory fsynced so that the rename
// itself survives a power loss. Every file payserver keeps to outlive a
// crash (the last good limits, the ledger of unsettled slots) is written
// through it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write puts data at path with perm, creating its directory (0700) when
// missing. On error the target is unchanged and no temporary file is left.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	fail := func(err error) error {
		_ = tmp.Close()
		_ = os.Remove(name)
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		_ = os.Remove(name)
		return err
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("%s written, but its directory could not be synced: %w", path, err)
	}
	return nil
}

// Remove removes path and fsyncs its directory, so that the removal
// survives a power loss; a missing file is no error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the renames and removals in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
