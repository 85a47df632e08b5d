package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestWriteIsReproducible(t *testing.T) {
	base := helloOptions(t)
	dir := t.TempDir()
	first := filepath.Join(dir, "first.tar")
	want, err := Write(base, first)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		change   func(*Options)
		wantSame bool
	}{
		{"gives the same digest and bytes when built again from the same inputs", func(*Options) {}, true},
		{"gives another digest for another version label", func(o *Options) { o.Version = "v1.2.4" }, false},
		{"gives another digest for another revision", func(o *Options) { o.Revision = "0000000" }, false},
		{"gives another digest for another creation time", func(o *Options) { o.Created = created.Add(time.Second) }, false},
		{"keeps the digest when only the tag changes, since the name lives outside the index", func(o *Options) { o.Tag = "latest" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := base
			tt.change(&opts)
			out := filepath.Join(t.TempDir(), "again.tar")
			got, err := Write(opts, out)
			if err != nil {
				t.Fatal(err)
			}
			if same := got.IndexDigest == want.IndexDigest; same != tt.wantSame {
				t.Fatalf("index digest %s, first build %s: same = %v, want %v", got.IndexDigest, want.IndexDigest, same, tt.wantSame)
			}
			if !tt.wantSame || opts.Tag != base.Tag {
				return
			}
			gotBytes, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotBytes, wantBytes) {
				t.Errorf("archives differ: %d bytes, first build %d bytes", len(gotBytes), len(wantBytes))
			}
		})
	}
}

func TestWriteArchive(t *testing.T) {
	opts := helloOptions(t)
	out := filepath.Join(t.TempDir(), "pitstop-image.tar")
	summary, err := Write(opts, out)
	if err != nil {
		t.Fatal(err)
	}
	dir, headers := untar(t, out)

	t.Run("packs the layout in lexical order, owned by root and stamped with the creation time", func(t *testing.T) {
		var names []string
		for _, h := range headers {
			names = append(names, h.Name)
			if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s is owned by %d:%d (%q:%q), want 0:0", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
			}
			if !h.ModTime.Equal(created) {
				t.Errorf("%s has mtime %v, want %v", h.Name, h.ModTime, created)
			}
		}
		if !slices.IsSorted(names) {
			t.Errorf("entries are not sorted: %q", names)
		}
		for _, want := range []string{"oci-layout", "index.json", "manifest.json", "blobs/sha256/" + summary.IndexDigest.Hex} {
			if !slices.Contains(names, want) {
				t.Errorf("archive has no %s: %q", want, names)
			}
		}
		if info, err := os.Stat(out); err != nil || info.Size() != summary.ArchiveSize {
			t.Errorf("archive size %v (%v), summary says %d", info.Size(), err, summary.ArchiveSize)
		}
	})

	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the layout: %v", err)
	}
	rootManifest, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rootManifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the one image index", len(rootManifest.Manifests))
	}
	entry := rootManifest.Manifests[0]

	t.Run("names the image in index.json for podman and containerd", func(t *testing.T) {
		if entry.MediaType != types.OCIImageIndex || entry.Digest != summary.IndexDigest {
			t.Errorf("index.json entry is %s %s, want %s %s", entry.MediaType, entry.Digest, types.OCIImageIndex, summary.IndexDigest)
		}
		for _, key := range []string{annotationRefName, annotationContainerdName} {
			if got := entry.Annotations[key]; got != "ghcr.io/pitstop-dev/pitstop:v1.2.3" {
				t.Errorf("annotation %s = %q, want ghcr.io/pitstop-dev/pitstop:v1.2.3", key, got)
			}
		}
	})

	idx, err := root.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	idxManifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("lists both platforms and carries the labels as annotations", func(t *testing.T) {
		var platforms []string
		for _, d := range idxManifest.Manifests {
			platforms = append(platforms, d.Platform.String())
			if d.MediaType != types.OCIManifestSchema1 || d.ArtifactType != "" {
				t.Errorf("%s is described as %s with artifact type %q, want an OCI image manifest and none", d.Platform, d.MediaType, d.ArtifactType)
			}
		}
		if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
			t.Errorf("platforms %q, want %q", platforms, want)
		}
		checkLabels(t, "index", idxManifest.Annotations)
	})

	t.Run("lists the amd64 image in manifest.json for classic docker load", func(t *testing.T) {
		checkDockerManifest(t, out, dir, headers, idx, "ghcr.io/pitstop-dev/pitstop:v1.2.3")
		if got := summary.DockerPlatform.String(); got != "linux/amd64" {
			t.Errorf("summary names %s for docker load, want linux/amd64", got)
		}
	})

	for i, d := range idxManifest.Manifests {
		t.Run("runs the "+d.Platform.String()+" binary as nonroot", func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img, opts.Binaries[i])
			if got := summary.Platforms[i]; got.Digest != d.Digest || got.CompressedSize <= d.Size {
				t.Errorf("summary for %s is %+v, want digest %s and a size above the manifest's", d.Platform, got, d.Digest)
			}
		})
	}
}

// checkImage checks one platform's manifest, config and layer.
func checkImage(t *testing.T, img v1.Image, bin Binary) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %s with config %s, want OCI media types", m.MediaType, m.Config.MediaType)
	}
	checkLabels(t, "manifest", m.Annotations)

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != bin.Platform.OS || cfg.Architecture != bin.Platform.Architecture {
		t.Errorf("config platform %s/%s, want %s", cfg.OS, cfg.Architecture, bin.Platform)
	}
	c := cfg.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/pitstop"}) ||
		!slices.Equal(c.Cmd, []string{"run"}) || c.WorkingDir != "/" {
		t.Errorf("config runs %q %q as %q in %q, want [/pitstop] [run] as 65532:65532 in /", c.Entrypoint, c.Cmd, c.User, c.WorkingDir)
	}
	if !cfg.Created.Equal(created) {
		t.Errorf("config created %v, want %v", cfg.Created, created)
	}
	checkLabels(t, "config", c.Labels)

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	files := layerFiles(t, layers[0])
	want, err := os.ReadFile(bin.Path)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		mode int64
		typ  byte
	}{
		{"pitstop", 0o755, tar.TypeReg},
		{"etc/", 0o755, tar.TypeDir},
		{"etc/passwd", 0o644, tar.TypeReg},
		{"etc/group", 0o644, tar.TypeReg},
		{"tmp/", 0o1777, tar.TypeDir},
	}
	for _, want := range checks {
		f, ok := files[want.name]
		if !ok {
			t.Errorf("layer has no %s", want.name)
			continue
		}
		if f.hdr.Mode != want.mode || f.hdr.Typeflag != want.typ || f.hdr.Uid != 0 || f.hdr.Gid != 0 || !f.hdr.ModTime.Equal(created) {
			t.Errorf("%s: type %c mode %o owner %d:%d mtime %v, want type %c mode %o owner 0:0 mtime %v",
				want.name, f.hdr.Typeflag, f.hdr.Mode, f.hdr.Uid, f.hdr.Gid, f.hdr.ModTime, want.typ, want.mode, created)
		}
	}
	if len(files) != len(checks) {
		t.Errorf("layer has %d entries, want %d", len(files), len(checks))
	}
	if !bytes.Equal(files["pitstop"].data, want) {
		t.Errorf("/pitstop differs from %s", bin.Path)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") ||
		!strings.Contains(string(files["etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("no nonroot user 65532 in /etc/passwd %q or /etc/group %q", files["etc/passwd"].data, files["etc/group"].data)
	}
}

type layerFile struct {
	hdr  *tar.Header
	data []byte
}

// layerFiles reads a layer's entries by name.
func layerFiles(t *testing.T, l v1.Layer) map[string]layerFile {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = layerFile{hdr: hdr, data: data}
	}
}

// checkLabels checks that one of the image's label or annotation maps
// carries the OCI labels of helloOptions.
func checkLabels(t *testing.T, where string, got map[string]string) {
	t.Helper()
	want := map[string]string{
		"org.opencontainers.image.title":       "pitstop",
		"org.opencontainers.image.version":     "v1.2.3",
		"org.opencontainers.image.revision":    "ef3ab93f33ce90295ac1bafb80d9271dc2e65415",
		"org.opencontainers.image.source":      "https://github.com/pitstop-dev/pitstop",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.description": description,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %s = %q, want %q", where, k, got[k], v)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	hello := helloOptions(t)
	amd64, arm64 := hello.Binaries[0], hello.Binaries[1]
	// /bin/true is the host's own dynamically linked program.
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

	tests := []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"refuses a tag that is no valid image tag", func(o *Options) { o.Tag = "v1+dirty" }, "invalid image name"},
		{"refuses an empty repository", func(o *Options) { o.Repository = "" }, "repository must not be empty"},
		{"refuses a missing revision", func(o *Options) { o.Revision = "" }, "revision must not be empty"},
		{"refuses a zero creation time", func(o *Options) { o.Created = time.Time{} }, "invalid creation time"},
		{"refuses an image without binaries", func(o *Options) { o.Binaries = nil }, "at least one binary"},
		{"refuses a platform given twice", func(o *Options) { o.Binaries = []Binary{amd64, amd64} }, "platform linux/amd64 given twice"},
		{"refuses a non-Linux platform", func(o *Options) { o.Binaries[0].Platform.OS = "darwin" }, "must be linux/<arch>"},
		{"refuses a binary built for another architecture", func(o *Options) {
			o.Binaries = []Binary{{Platform: amd64.Platform, Path: arm64.Path}}
		}, "is built for EM_AARCH64, not EM_X86_64"},
		{"refuses a dynamically linked binary, since the image has no libc", func(o *Options) {
			o.Binaries = []Binary{{Platform: host, Path: "/bin/true"}}
		}, "dynamically linked"},
		{"refuses a file that is no program", func(o *Options) {
			o.Binaries = []Binary{{Platform: host, Path: "testdata/hello/main.go"}}
		}, "is not an ELF file"},
		{"refuses a binary that does not exist", func(o *Options) {
			o.Binaries = []Binary{{Platform: host, Path: "testdata/missing"}}
		}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := hello
			opts.Binaries = slices.Clone(hello.Binaries)
			tt.change(&opts)
			_, err := Build(opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
