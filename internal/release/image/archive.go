package image

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations on the index.json entry that name the image for loaders.
// Podman and the OCI spec read ref.name; containerd (ctr, nerdctl, Docker
// with the containerd image store) reads its own key and falls back to
// ref.name only as a tag under a base name. Classic Docker reads neither: it
// takes the name from RepoTags in manifest.json (see dockerManifestFile).
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// Summary describes an archive that Write produced.
type Summary struct {
	// Reference is the name loaders give the image.
	Reference string
	// IndexDigest is the digest of the multi-platform index, the image's
	// identity once pushed.
	IndexDigest v1.Hash
	// ArchiveSize is the size of the tar in bytes.
	ArchiveSize int64
	// Platforms describes each platform's image, in index order.
	Platforms []PlatformSummary
	// DockerPlatform is the platform of the one image manifest.json lists,
	// the image classic `docker load` takes.
	DockerPlatform v1.Platform
}

// PlatformSummary describes one platform's image in an archive.
type PlatformSummary struct {
	// Platform is the image's OS and architecture.
	Platform v1.Platform
	// Digest is the digest of the platform's manifest.
	Digest v1.Hash
	// CompressedSize is what a pull of this platform transfers: manifest,
	// config and compressed layers, in bytes.
	CompressedSize int64
}

// Write builds the image for opts and writes it to out as an OCI image
// layout packed into one tar: oci-layout, index.json naming the image, and
// blobs/, which podman and containerd load; plus manifest.json, which lists
// the linux/amd64 image by the same blobs for classic `docker load`. The file
// is replaced atomically, so a failed run leaves no half archive behind.
func Write(opts Options, out string) (Summary, error) {
	idx, err := Build(opts)
	if err != nil {
		return Summary{}, err
	}
	summary, err := summarize(opts.Reference(), idx)
	if err != nil {
		return Summary{}, err
	}
	dir, err := os.MkdirTemp("", "pitstop-image-")
	if err != nil {
		return Summary{}, fmt.Errorf("creating the layout directory: %w", err)
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return Summary{}, fmt.Errorf("starting the image layout: %w", err)
	}
	names := map[string]string{
		annotationRefName:        opts.Reference(),
		annotationContainerdName: opts.Reference(),
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(names)); err != nil {
		return Summary{}, fmt.Errorf("writing the image layout: %w", err)
	}
	docker, platform, err := dockerManifest(opts.Reference(), idx)
	if err != nil {
		return Summary{}, err
	}
	if err := lp.WriteFile(dockerManifestFile, docker, 0o644); err != nil {
		return Summary{}, fmt.Errorf("writing %s: %w", dockerManifestFile, err)
	}
	summary.DockerPlatform = platform
	size, err := packDir(dir, out, opts.created())
	if err != nil {
		return Summary{}, err
	}
	summary.ArchiveSize = size
	return summary, nil
}

// summarize returns the digests and pull sizes of idx.
func summarize(ref string, idx v1.ImageIndex) (Summary, error) {
	digest, err := idx.Digest()
	if err != nil {
		return Summary{}, fmt.Errorf("computing the index digest: %w", err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return Summary{}, fmt.Errorf("reading the index: %w", err)
	}
	s := Summary{Reference: ref, IndexDigest: digest}
	for _, desc := range manifest.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return Summary{}, fmt.Errorf("reading image %s: %w", desc.Digest, err)
		}
		m, err := img.Manifest()
		if err != nil {
			return Summary{}, fmt.Errorf("reading manifest %s: %w", desc.Digest, err)
		}
		size := desc.Size + m.Config.Size
		for _, l := range m.Layers {
			size += l.Size
		}
		p := PlatformSummary{Digest: desc.Digest, CompressedSize: size}
		if desc.Platform != nil {
			p.Platform = *desc.Platform
		}
		s.Platforms = append(s.Platforms, p)
	}
	return s, nil
}

// packDir writes every file under dir into the tar out, in lexical order,
// owned by root, with fixed modes and mtime, so the same layout gives the
// same bytes whatever the umask, user or clock of the machine. It returns
// the archive's size.
func packDir(dir, out string, mtime time.Time) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", out, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()

	tw := tar.NewWriter(tmp)
	// WalkDir visits entries in lexical order, which fixes the archive's.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{
			Name:    filepath.ToSlash(rel),
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("unexpected file type %v at %s", d.Type(), rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("packing the image layout into %s: %w", out, err)
	}
	if err := tw.Close(); err != nil {
		return 0, fmt.Errorf("finishing %s: %w", out, err)
	}
	info, err := tmp.Stat()
	if err != nil {
		return 0, fmt.Errorf("finishing %s: %w", out, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return 0, fmt.Errorf("finishing %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("finishing %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return 0, fmt.Errorf("finishing %s: %w", out, err)
	}
	return info.Size(), nil
}
