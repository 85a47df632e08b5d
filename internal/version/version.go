// Package version reports which pitstop this is. Version and Commit are set
// at link time by the Makefile; a plain `go build` reports "dev".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

var (
	// Version is the release, or `git describe` output for a build from a
	// checkout.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = ""
)

// Info is what `pitstop version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build's version information. Without a link-time commit it
// falls back to the VCS revision the Go toolchain stamped, if any.
func Get() Info {
	commit := Commit
	if commit == "" {
		commit = "unknown"
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Info{
		Version:   Version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String renders the information on one line.
func (i Info) String() string {
	return fmt.Sprintf("pitstop %s (commit %s, %s %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}
