package image

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Fixed facts about pitstop that every image carries as labels and
// annotations.
const (
	title       = "pitstop"
	description = "Keeps the nodes of a Kubernetes cluster, and the machines under them, maintained."
	source      = "https://github.com/pitstop-dev/pitstop"
	licenses    = "Apache-2.0"
)

// Binary is one platform's pitstop executable: a static Linux ELF file built
// for Platform.
type Binary struct {
	// Platform is the OS and architecture the binary was built for, such as
	// linux/amd64.
	Platform v1.Platform
	// Path is where the compiled binary is on disk.
	Path string
}

// Options says what goes into the image and how it is named.
type Options struct {
	// Repository is the image's repository, such as ghcr.io/pitstop-dev/pitstop.
	Repository string
	// Tag is the image's tag; with Repository it forms the name loaders give
	// the image.
	Tag string
	// Version is pitstop's version, recorded in the labels.
	Version string
	// Revision is the git commit the binaries were built from.
	Revision string
	// Created is the image's creation time, normally the commit's time so that
	// the same commit gives the same image. It is kept to the second.
	Created time.Time
	// Binaries holds one binary per platform, in the order the index lists
	// them.
	Binaries []Binary
}

// Reference returns the full image name, repository and tag, that loaders
// give the image.
func (o Options) Reference() string {
	return o.Repository + ":" + o.Tag
}

// Validate reports the first option that cannot make an image.
func (o Options) Validate() error {
	if o.Repository == "" {
		return errors.New("repository must not be empty")
	}
	if o.Tag == "" {
		return errors.New("tag must not be empty")
	}
	if _, err := name.NewTag(o.Reference()); err != nil {
		return fmt.Errorf("invalid image name %q: %w", o.Reference(), err)
	}
	if o.Version == "" {
		return errors.New("version must not be empty")
	}
	if o.Revision == "" {
		return errors.New("revision must not be empty")
	}
	if o.Created.IsZero() || o.Created.Unix() <= 0 {
		return fmt.Errorf("invalid creation time %v: must be after 1970-01-01", o.Created)
	}
	if len(o.Binaries) == 0 {
		return errors.New("at least one binary is needed")
	}
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		p := b.Platform.String()
		if b.Platform.OS != "linux" || b.Platform.Architecture == "" {
			return fmt.Errorf("invalid platform %q for %s: must be linux/<arch>", p, b.Path)
		}
		if seen[p] {
			return fmt.Errorf("platform %s given twice", p)
		}
		seen[p] = true
	}
	return nil
}

// labels returns the OCI labels the image config carries; the same map is
// put on the manifests and the index as annotations, so registries and
// loaders show them without fetching a config.
func (o Options) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.licenses":    licenses,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.created().Format(time.RFC3339),
	}
}

// created returns the creation time in UTC, whole seconds, the form every
// timestamp in the image takes.
func (o Options) created() time.Time {
	return o.Created.UTC().Truncate(time.Second)
}
