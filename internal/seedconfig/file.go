package seedconfig

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Load reads an integration's file at path and parses it; what names the
// file in errors ("the ESX configuration"). With missingOK a missing file
// is parsed as empty: every default.
func Load[T any](path, what string, missingOK bool, parse func([]byte) (T, error)) (T, error) {
	var zero T
	raw, err := os.ReadFile(path)
	if missingOK && errors.Is(err, os.ErrNotExist) {
		raw, err = nil, nil
	}
	if err != nil {
		return zero, fmt.Errorf("reading %s: %w", what, err)
	}
	cfg, err := parse(raw)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return cfg, nil
}

// Reloader keeps a configuration read from a file current without reading
// the file each time it is asked for: Get loads it again only when the
// file's size or modification time changed (a Secret's mounted file is
// replaced when the Secret changes), and keeps the last good
// configuration when the new one does not load.
type Reloader[T any] struct {
	path string
	load func() (T, error)

	mu    sync.Mutex
	cur   T
	stamp fileStamp
}

// fileStamp is what says a file changed.
type fileStamp struct {
	exists  bool
	size    int64
	modTime time.Time
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{exists: true, size: fi.Size(), modTime: fi.ModTime()}
}

// NewReloader loads the configuration once: an error is load's.
func NewReloader[T any](path string, load func() (T, error)) (*Reloader[T], error) {
	r := &Reloader[T]{path: path, load: load, stamp: stampOf(path)}
	cfg, err := load()
	if err != nil {
		return nil, err
	}
	r.cur = cfg
	return r, nil
}

// Get returns the current configuration. When the file changed it is
// loaded again; if that fails, the last good configuration is returned
// with the error, once per change of the file.
func (r *Reloader[T]) Get() (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp := stampOf(r.path)
	if stamp == r.stamp {
		return r.cur, nil
	}
	r.stamp = stamp
	cfg, err := r.load()
	if err != nil {
		return r.cur, err
	}
	r.cur = cfg
	return cfg, nil
}
