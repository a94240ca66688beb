package plugin

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"path/filepath"
)

// unixPathMax is the longest path a unix socket can be bound to on Linux (sun_path).
const unixPathMax = 108

// draSocketName is the name of the DRA gRPC socket in the plugin's data directory. The
// helper's default during a rolling update, dra-<pod UID>.sock, overflows a unix socket
// path below a long kubelet directory with a long driver name (the local cluster's
// /var/lib/rdma-dra-local/kubelet/plugins/<driver>/ with a 23-character name already
// does); then the pod UID is shortened to a hash, which stays unique between the two
// instances of a rolling update, the only ones that share the directory. A data
// directory too long for even that is an error that names the path.
func draSocketName(dataDir, podUID string) (string, error) {
	name := "dra.sock"
	if podUID != "" {
		name = "dra-" + podUID + ".sock"
		if len(filepath.Join(dataDir, name)) > unixPathMax {
			sum := sha256.Sum256([]byte(podUID))
			name = "dra-" + base64.RawURLEncoding.EncodeToString(sum[:8]) + ".sock"
		}
	}
	if p := filepath.Join(dataDir, name); len(p) > unixPathMax {
		return "", fmt.Errorf("the DRA socket %s is %d bytes long, more than a unix socket path can be (%d): use a shorter --driver-name or kubelet directory", p, len(p), unixPathMax)
	}
	return name, nil
}
