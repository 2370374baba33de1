package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteReplacesWhole: a write creates the directory, replaces the file
// whole with the permission asked, and leaves no temporary file.
func TestWriteReplacesWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "f.json")
	for _, content := range []string{"first, a longer one", "second"} {
		if err := Write(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", info.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("%d entries in the directory, want the file alone", len(entries))
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Fatalf("removing a missing file: %v", err)
	}
}

// TestWriteIntoAFileIsAnError: a directory that cannot exist is an error,
// and nothing is left behind.
func TestWriteIntoAFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(blocker, "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("a write under a file succeeded")
	}
}
