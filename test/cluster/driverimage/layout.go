// Package driverimage declares the driver image once, the files it adds to its base image
// (Files), its config (Config) and its labels (Labels), and builds it from that declaration
// without a container engine, as an OCI archive for the local cluster. The Containerfile's
// final stage is written from the same declaration (Containerfile), and a test builds the
// Containerfile with buildah and compares the two images' filesystems and configs.
package driverimage

import (
	"io/fs"
	"path"
	"sort"
)

// File is one file the image adds to its base: a static binary built from a main package.
type File struct {
	// Path inside the image, e.g. /usr/bin/rdma-dra-kubeletplugin.
	Path string
	Mode fs.FileMode
	// UID and GID own the file.
	UID, GID int
	// Package is the main package relative to the repository, e.g. cmd/rdma-dra.
	Package string
}

// Name is the binary's file name in the build context: `make image` cross-compiles each
// binary to _output/image/<StageDir(arch)>/<Name>, as `go build -o DIR/` names it.
func (f File) Name() string { return path.Base(f.Package) }

// StageDir is the build context's directory of one architecture's binaries.
func StageDir(arch string) string { return "linux_" + arch }

// Files is the image's own content, the one list of it. The kubelet plugin copies the CDI
// hook from the image to the host's hook directory for the runtime.
var Files = []File{
	{Path: "/usr/bin/rdma-dra-kubeletplugin", Mode: 0o755, Package: "cmd/rdma-dra-kubeletplugin"},
	{Path: "/usr/bin/rdma-dra", Mode: 0o755, Package: "cmd/rdma-dra"},
	{Path: "/usr/bin/rdma-dra-cdi-hook", Mode: 0o755, Package: "cmd/rdma-dra-cdi-hook"},
	{Path: "/usr/bin/rdma-dra-controller", Mode: 0o755, Package: "cmd/rdma-dra-controller"},
}

// RuntimeConfig is the part of the image config that the image sets over its base's.
type RuntimeConfig struct {
	// Entrypoint nil keeps the base's, which has none.
	Entrypoint []string
	Cmd        []string
	User       string
	WorkingDir string
}

// Config is the image's runtime config. The kubelet plugin runs as root: it writes
// root-owned host directories (the kubelet's plugin directories, /var/run/cdi, the hook
// directory) and reads root-only sysfs files, without any capability (see the chart's
// values.yaml). The CLI and the controller run as any user; the controller's Deployment
// sets a non-root one.
var Config = RuntimeConfig{
	Cmd:        []string{"/usr/bin/rdma-dra-kubeletplugin"},
	User:       "0:0",
	WorkingDir: "/",
}

// staticLabels are the OCI annotations of the image that do not depend on the build.
var staticLabels = map[string]string{
	"org.opencontainers.image.title":       "rdma-dra-driver",
	"org.opencontainers.image.description": "Kubernetes DRA driver for RDMA adapters (InfiniBand and RoCE HCAs)",
	"org.opencontainers.image.source":      "https://github.com/rdma-dra/rdma-dra-driver",
	"org.opencontainers.image.url":         "https://github.com/rdma-dra/rdma-dra-driver",
	"org.opencontainers.image.vendor":      "rdma-dra",
}

// Labels returns the image's labels for a version (the image tag) and a revision (the git
// commit).
func Labels(version, revision string) map[string]string {
	out := map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
	}
	for k, v := range staticLabels {
		out[k] = v
	}
	return out
}

// BaseFile is a file of the base image that the driver relies on.
type BaseFile struct {
	Path string
	Mode fs.FileMode
	Dir  bool
}

// BaseFiles are what the driver needs from its base image (distroless static): the CA
// bundle for the API server's and webhooks' TLS, the user database, a writable /tmp. The
// engine-free build's stand-in base holds exactly these (BaseImage).
var BaseFiles = []BaseFile{
	{Path: "/etc/passwd", Mode: 0o644},
	{Path: "/etc/group", Mode: 0o644},
	{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644},
	{Path: "/tmp", Mode: 0o1777, Dir: true},
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
