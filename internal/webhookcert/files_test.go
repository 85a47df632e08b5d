package webhookcert

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteServingFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serving-certs")
	if err := writeServingFiles(dir, []byte("cert 1"), []byte("key 1")); err != nil {
		t.Fatal(err)
	}
	assertFile(t, filepath.Join(dir, "tls.crt"), "cert 1", 0o644)
	assertFile(t, filepath.Join(dir, "tls.key"), "key 1", 0o600)
	before, err := os.Stat(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}

	// Only the certificate changed: the key file must be the same file, so
	// the certwatcher sees no event for it.
	if err := writeServingFiles(dir, []byte("cert 2"), []byte("key 1")); err != nil {
		t.Fatal(err)
	}
	assertFile(t, filepath.Join(dir, "tls.crt"), "cert 2", 0o644)
	after, err := os.Stat(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("an unchanged key file was rewritten")
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only tls.crt and tls.key (no temporary files)", names)
	}
}

func assertFile(t *testing.T, path, want string, perm os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != perm {
		t.Errorf("%s has mode %v, want %v", path, info.Mode().Perm(), perm)
	}
}
