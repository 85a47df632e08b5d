package webhookcert

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// writeServingFiles writes tls.key and tls.crt into dir, the names
// controller-runtime's webhook server reads by default. Its certwatcher
// reloads on file events and every 10 seconds; each file is replaced by
// rename, so it never reads a half-written file. Between the two renames it
// may read a key that does not match the certificate: it then logs the
// error and keeps serving the old pair until the second rename's event.
func writeServingFiles(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, corev1.TLSPrivateKeyKey), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, corev1.TLSCertKey), certPEM, 0o644)
}

// writeFileAtomic replaces path with data through a temporary file in the
// same directory and a rename. A file that already holds data is left
// alone, so the certwatcher does not reload for nothing.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	current, err := os.ReadFile(path)
	if err == nil && bytes.Equal(current, data) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	// Without the sync, a crash after the rename could leave an empty file
	// under the real name.
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		return fmt.Errorf("setting mode of %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}
