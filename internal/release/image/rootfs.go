package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"time"
)

// user is who the image runs as: nonroot, also named in /etc/passwd so that
// tools which resolve the uid show a name. Its home is /tmp, the one
// writable place, which runtimes export as $HOME.
const user = "65532:65532"

var (
	passwd = []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n")
	group = []byte("root:x:0:\n" +
		"nonroot:x:65532:\n")
)

// entry is one file or directory of the image's root file system.
type entry struct {
	name string
	mode int64
	dir  bool
	data []byte
}

// rootFS returns the image's only layer as an uncompressed tar: the binary at
// /pitstop, /etc/passwd and /etc/group, and /tmp. /tmp is sticky and
// world-writable because the manager writes its webhook certificates under
// $TMPDIR by default; in Kubernetes the root file system is read-only and an
// emptyDir is mounted there instead. Entries are in a fixed order, owned by
// root and stamped with created, so the same binary gives the same bytes.
func rootFS(binary []byte, created time.Time) ([]byte, error) {
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: group},
		{name: "etc/passwd", mode: 0o644, data: passwd},
		{name: "pitstop", mode: 0o755, data: binary},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:     e.name,
			Mode:     e.mode,
			ModTime:  created,
			Typeflag: tar.TypeReg,
			Size:     int64(len(e.data)),
			Format:   tar.FormatUSTAR,
		}
		if e.dir {
			hdr.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}
