package image

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestPickDockerImage(t *testing.T) {
	image := func(hex string, p *v1.Platform) v1.Descriptor {
		return v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: hex}, Platform: p}
	}
	var (
		amd64   = image("a", &v1.Platform{OS: "linux", Architecture: "amd64"})
		amd64v3 = image("a3", &v1.Platform{OS: "linux", Architecture: "amd64", Variant: "v3"})
		arm64   = image("b", &v1.Platform{OS: "linux", Architecture: "arm64"})
		s390x   = image("c", &v1.Platform{OS: "linux", Architecture: "s390x"})
		windows = image("d", &v1.Platform{OS: "windows", Architecture: "amd64"})
		bare    = image("e", nil)
	)
	tests := []struct {
		name      string
		manifests []v1.Descriptor
		want      v1.Descriptor
		wantOK    bool
	}{
		{"takes linux/amd64 wherever the index lists it", []v1.Descriptor{arm64, amd64}, amd64, true},
		{"takes linux/amd64 of any variant", []v1.Descriptor{arm64, amd64v3}, amd64v3, true},
		{"skips amd64 images of another OS", []v1.Descriptor{windows, arm64, amd64}, amd64, true},
		{"falls back to the first image when there is no linux/amd64", []v1.Descriptor{arm64, s390x}, arm64, true},
		{"falls back to the first image when none names its platform", []v1.Descriptor{bare}, bare, true},
		{"finds nothing in an empty index", nil, v1.Descriptor{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := pickDockerImage(tt.manifests)
			if ok != tt.wantOK || got.Digest != tt.want.Digest {
				t.Errorf("pickDockerImage() = %s, %v, want %s, %v", got.Digest, ok, tt.want.Digest, tt.wantOK)
			}
		})
	}
}

// checkDockerManifest checks that the archive at out, with the given tar
// headers and extracted into dir, has a manifest.json that names the
// linux/amd64 image of idx as ref by the blobs the OCI layout holds, and that
// go-containerregistry's reader of docker-save archives loads that image.
func checkDockerManifest(t *testing.T, out, dir string, headers []*tar.Header, idx v1.ImageIndex, ref string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatalf("reading manifest.json: %v", err)
	}
	var manifest tarball.Manifest
	if err := json.Unmarshal(data, &manifest); err != nil {
		t.Fatalf("decoding manifest.json: %v\n%s", err, data)
	}
	if len(manifest) != 1 {
		t.Fatalf("manifest.json lists %d images, want the amd64 one only:\n%s", len(manifest), data)
	}
	entry := manifest[0]
	if !slices.Equal(entry.RepoTags, []string{ref}) {
		t.Errorf("RepoTags = %q, want [%q]", entry.RepoTags, ref)
	}

	want := amd64Image(t, idx)
	m, err := want.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := "blobs/sha256/" + m.Config.Digest.Hex; entry.Config != got {
		t.Errorf("Config = %q, want the amd64 config %q", entry.Config, got)
	}
	var wantLayers []string
	for _, l := range m.Layers {
		wantLayers = append(wantLayers, "blobs/sha256/"+l.Digest.Hex)
	}
	if !slices.Equal(entry.Layers, wantLayers) {
		t.Errorf("Layers = %q, want the amd64 layers %q", entry.Layers, wantLayers)
	}

	// Every path must be a regular file of the tar whose content is the blob
	// its name promises, or the loader reads something else.
	for _, p := range append([]string{entry.Config}, entry.Layers...) {
		i := slices.IndexFunc(headers, func(h *tar.Header) bool { return h.Name == p })
		if i < 0 || headers[i].Typeflag != tar.TypeReg {
			t.Errorf("manifest.json names %s, which the archive holds no file at", p)
			continue
		}
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := v1.SHA256(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if "blobs/sha256/"+h.Hex != p {
			t.Errorf("%s holds content with digest %s", p, h)
		}
	}

	// go-containerregistry reads docker-save archives the way docker load
	// does: by RepoTags, then Config and Layers as paths in the tar.
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("reading the archive as a docker-save archive: %v", err)
	}
	if got, err := img.ConfigName(); err != nil || got != m.Config.Digest {
		t.Errorf("docker-save config %s (%v), want %s", got, err, m.Config.Digest)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(m.Layers) {
		t.Fatalf("docker-save image has %d layers, want %d", len(layers), len(m.Layers))
	}
	for i, l := range layers {
		if got, err := l.Digest(); err != nil || got != m.Layers[i].Digest {
			t.Errorf("docker-save layer %d is %s (%v), want %s", i, got, err, m.Layers[i].Digest)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n == 0 {
			t.Errorf("decompressing docker-save layer %d: %d bytes, %v", i, n, err)
		}
	}
}

// amd64Image returns the linux/amd64 image of idx.
func amd64Image(t *testing.T, idx v1.ImageIndex) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.String() == "linux/amd64" {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("the index lists no linux/amd64 image")
	return nil
}
