package image

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// machines maps Go architectures to the ELF machine their binaries declare.
var machines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// readBinary reads the binary at path and checks that it can run as the only
// program of an image for platform: a Linux ELF file for that architecture
// with no dynamic loader, since the image has no libc. It catches a binary
// built for the wrong GOARCH, or with cgo, before it ships.
func readBinary(path string, platform v1.Platform) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading binary for %s: %w", platform, err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("binary %s for %s is not an ELF file: %w", path, platform, err)
	}
	defer f.Close()
	want, ok := machines[platform.Architecture]
	if !ok {
		return nil, fmt.Errorf("unsupported architecture %q for %s", platform.Architecture, path)
	}
	if f.Machine != want {
		return nil, fmt.Errorf("binary %s for %s is built for %s, not %s", path, platform, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("binary %s for %s is dynamically linked and the image has no libc: build it with CGO_ENABLED=0", path, platform)
		}
	}
	return data, nil
}
