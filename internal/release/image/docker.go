package image

import (
	"encoding/json"
	"fmt"
	"path"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dockerManifestFile is the docker-save index: a JSON array of {Config,
// RepoTags, Layers}, each a path inside the tar. Classic Docker (`docker
// load` without the containerd image store, moby's image/tarexport) reads
// only this file and never index.json. podman tries the OCI layout before a
// docker archive, and containerd takes the layout whenever oci-layout is
// present, so both keep loading the multi-platform index and ignore it. The
// same pair of files is what `docker save` writes with the containerd store.
const dockerManifestFile = "manifest.json"

// dockerArchitecture is the architecture of the image manifest.json lists:
// classic Docker's store holds one image per name, so the archive offers it
// the platform most of its hosts run.
const dockerArchitecture = "amd64"

// dockerManifest returns the content of manifest.json for idx: one entry,
// named ref, for the image pickDockerImage chooses, and that image's
// platform. The entry points at the blobs the OCI layout already holds, so
// nothing is stored twice. The layer stays gzip-compressed: the loader
// detects compression by the blob's magic bytes and decompresses it, and it
// takes any path the entry names, since it looks for no particular file name
// such as layer.tar once manifest.json exists.
func dockerManifest(ref string, idx v1.ImageIndex) ([]byte, v1.Platform, error) {
	index, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Platform{}, fmt.Errorf("reading the index: %w", err)
	}
	desc, ok := pickDockerImage(index.Manifests)
	if !ok {
		return nil, v1.Platform{}, fmt.Errorf("the index lists no image for %s", dockerManifestFile)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		return nil, v1.Platform{}, fmt.Errorf("reading image %s: %w", desc.Digest, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, v1.Platform{}, fmt.Errorf("reading manifest %s: %w", desc.Digest, err)
	}
	entry := tarball.Descriptor{Config: blobPath(m.Config.Digest), RepoTags: []string{ref}}
	for _, l := range m.Layers {
		entry.Layers = append(entry.Layers, blobPath(l.Digest))
	}
	data, err := json.Marshal(tarball.Manifest{entry})
	if err != nil {
		return nil, v1.Platform{}, fmt.Errorf("encoding %s: %w", dockerManifestFile, err)
	}
	var platform v1.Platform
	if desc.Platform != nil {
		platform = *desc.Platform
	}
	return data, platform, nil
}

// pickDockerImage returns the linux/amd64 image of an index, whatever its
// variant, or the first image when there is none, so that a single-platform
// archive built for another host still loads there.
func pickDockerImage(manifests []v1.Descriptor) (v1.Descriptor, bool) {
	if len(manifests) == 0 {
		return v1.Descriptor{}, false
	}
	for _, d := range manifests {
		if p := d.Platform; p != nil && p.OS == "linux" && p.Architecture == dockerArchitecture {
			return d, true
		}
	}
	return manifests[0], true
}

// blobPath returns where an OCI image layout keeps the blob with digest h.
func blobPath(h v1.Hash) string {
	return path.Join("blobs", h.Algorithm, h.Hex)
}
