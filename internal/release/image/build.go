package image

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

// createdBy is the history entry of the only layer. It names what the layer
// holds rather than a command line, which would carry host paths.
const createdBy = "pitstop release image: /pitstop, /etc/passwd, /etc/group, /tmp"

// Build returns the multi-platform image index for opts: one image per
// binary, in the order given, each annotated with the OCI labels. Nothing is
// written to disk; Write packs the result into an archive.
func Build(opts Options) (v1.ImageIndex, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid image options: %w", err)
	}
	// Compressing a layer is most of the work; the platforms compress in
	// parallel and keep their order in the index.
	adds := make([]mutate.IndexAddendum, len(opts.Binaries))
	var g errgroup.Group
	for i, b := range opts.Binaries {
		g.Go(func() error {
			img, err := platformImage(opts, b)
			if err != nil {
				return err
			}
			platform := b.Platform
			adds[i] = mutate.IndexAddendum{Add: plainImage{img}, Descriptor: v1.Descriptor{Platform: &platform}}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	annotated, ok := mutate.Annotations(idx, opts.labels()).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotating the image index: got %T, not an index", idx)
	}
	return annotated, nil
}

// platformImage builds the image for one binary: an OCI manifest whose config
// runs /pitstop run as nonroot and whose only layer is rootFS.
func platformImage(opts Options, b Binary) (v1.Image, error) {
	binary, err := readBinary(b.Path, b.Platform)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: opts.created()}
	rootfs, err := rootFS(binary, opts.created())
	if err != nil {
		return nil, fmt.Errorf("building the layer for %s: %w", b.Platform, err)
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(rootfs)), nil },
		tarball.WithMediaType(types.OCILayer),
		// The default level: the best one saves under 1% of a Go binary's
		// size and takes three times as long.
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		// The layer is compressed once to learn its digest and read again
		// when the layout is written; caching spares a second compression.
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("compressing the layer for %s: %w", b.Platform, err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: b.Platform.Architecture,
		OS:           b.Platform.OS,
		Variant:      b.Platform.Variant,
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: []string{"/pitstop"},
			Cmd:        []string{"run"},
			User:       user,
			WorkingDir: "/",
			Labels:     opts.labels(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("setting the config for %s: %w", b.Platform, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: createdBy},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer for %s: %w", b.Platform, err)
	}
	annotated, ok := mutate.Annotations(img, opts.labels()).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating the image for %s: got %T, not an image", b.Platform, img)
	}
	return annotated, nil
}

// plainImage describes itself in an index as an ordinary image. Without it
// go-containerregistry gives every image descriptor an artifactType copied
// from the config media type, which OCI 1.1 reserves for artifacts and which
// registries and tools then show as one.
type plainImage struct{ v1.Image }

// ArtifactType reports that the image is no artifact.
func (plainImage) ArtifactType() (string, error) { return "", nil }
