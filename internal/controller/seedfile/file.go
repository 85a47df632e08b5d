package seedfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/pitstop-dev/pitstop/internal/importer"
)

// Load reads the file at path and imports it as `pitstop import` does,
// with env for ${NAME} (nil: none set) and the notifications' Secret in
// namespace. An error names the file, and the line where the importer
// found the problem.
func Load(path, namespace string, env func(string) (string, bool)) (*importer.Result, error) {
	data, err := os.ReadFile(path)
	return load(path, namespace, env, data, err)
}

// load imports data, read from path with readErr.
func load(path, namespace string, env func(string) (string, bool), data []byte, readErr error) (*importer.Result, error) {
	if readErr != nil {
		if inner := errors.Unwrap(readErr); inner != nil {
			readErr = inner // the path is said once, below
		}
		return nil, fmt.Errorf("reading %s: %w", path, readErr)
	}
	return importer.Import(data, importer.Options{File: path, Env: env, SecretNamespace: namespace})
}

// version says which content of the file a sync saw: a hash of its bytes,
// or the read error. The content, not the file's inode, size or
// modification time: the kubelet updates a mounted ConfigMap by writing
// a new directory and swapping the ..data symlink to it, and an edit of
// the same length may keep the time within its granularity.
func version(data []byte, readErr error) string {
	if readErr != nil {
		return "error: " + readErr.Error()
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// short is the first characters of a version, for messages.
func short(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}
