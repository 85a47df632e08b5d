// Command image packs pitstop binaries that `make image` cross-compiled into
// the release image archive: an OCI image layout in one tar, holding a
// multi-platform index, that podman, containerd and Docker load without a
// registry; classic Docker, without the containerd image store, loads the
// one platform its manifest.json lists. It owns flags only;
// internal/release/image builds the archive.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/pitstop-dev/pitstop/internal/release/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// binaryFlags collects repeated -binary os/arch=path flags.
type binaryFlags []image.Binary

func (b *binaryFlags) String() string {
	parts := make([]string, 0, len(*b))
	for _, bin := range *b {
		parts = append(parts, bin.Platform.String()+"="+bin.Path)
	}
	return strings.Join(parts, ",")
}

func (b *binaryFlags) Set(s string) error {
	platform, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("want os/arch=path, got %q", s)
	}
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return fmt.Errorf("parsing platform %q: %w", platform, err)
	}
	*b = append(*b, image.Binary{Platform: *p, Path: path})
	return nil
}

func run(args []string, stdout io.Writer) error {
	var (
		opts     image.Options
		binaries binaryFlags
		out      string
		created  string
	)
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.Var(&binaries, "binary", "os/arch=path of a static pitstop binary; repeat once per platform")
	fs.StringVar(&out, "out", "dist/pitstop-image.tar", "where to write the archive")
	fs.StringVar(&opts.Repository, "repo", "ghcr.io/pitstop-dev/pitstop", "image repository")
	fs.StringVar(&opts.Tag, "tag", "", "image tag (default: the version)")
	fs.StringVar(&opts.Version, "version", "", "pitstop version for the labels")
	fs.StringVar(&opts.Revision, "revision", "", "git commit for the labels")
	fs.StringVar(&created, "created", "", "creation time in Unix seconds, normally the commit's time (git log -1 --format=%ct)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if created == "" {
		return errors.New("flag -created is required")
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("invalid value %q for flag -created: %w", created, err)
	}
	opts.Created = time.Unix(secs, 0)
	if opts.Tag == "" {
		opts.Tag = opts.Version
	}
	opts.Binaries = binaries

	s, err := image.Write(opts, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s\n", s.Reference, s.IndexDigest)
	for _, p := range s.Platforms {
		fmt.Fprintf(stdout, "  %-12s %s %s compressed\n", p.Platform, p.Digest, mib(p.CompressedSize))
	}
	fmt.Fprintf(stdout, "%s %s (classic docker load: %s)\n", out, mib(s.ArchiveSize), s.DockerPlatform)
	return nil
}

// mib formats a byte count for people.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
