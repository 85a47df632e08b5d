//go:build !linux

package main

import (
	"bytes"
	"testing"
)

func TestDevSaysItRunsOnlyOnLinux(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"dev", "--nodes=3"}, &stdout, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if want := "pitstop: " + errDevNotLinux.Error() + "\n"; stderr.String() != want {
		t.Errorf("stderr %q, want the one line %q", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing: nothing starts", stdout.String())
	}
}
