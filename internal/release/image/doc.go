// Package image builds pitstop's container image from binaries that are
// already compiled: one layer per platform holding the static binary at
// /pitstop, a minimal /etc/passwd and /etc/group with the nonroot user 65532,
// and a world-writable /tmp; an image config and manifest per platform; and
// one multi-platform image index, written as an OCI image layout packed into a
// single tar. Beside the layout the tar holds a docker-save manifest.json, as
// `docker save` with the containerd image store writes: podman, containerd
// (ctr, nerdctl) and Docker with the containerd store read oci-layout and
// index.json and load every platform, while classic Docker reads only
// manifest.json, which lists the linux/amd64 image by the same blobs. It owns
// the image's contents and metadata and keeps them reproducible: every
// timestamp is the given creation time, every owner is root, and no host path
// or build ID reaches the output. It must not compile Go code, pull a base
// image, talk to a registry or a container daemon; the Makefile compiles the
// binaries and loaders take the archive from there.
package image
