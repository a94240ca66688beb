package cdi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// topologyContainerDir is where a claim's NCCL topology file appears in its containers.
const topologyContainerDir = "/var/run/rdma-dra"

// TopologyFile is the host path of a claim's NCCL topology file in dir.
func TopologyFile(dir, claimUID string) string {
	return filepath.Join(dir, claimUID+".xml")
}

// TopologyContainerPath is where a claim's NCCL topology file is mounted in its
// containers, and what NCCL_TOPO_FILE names.
func TopologyContainerPath(claimUID string) string {
	return path.Join(topologyContainerDir, "nccl-topology-"+claimUID+".xml")
}

// asksTopology reports whether a request's config asks for the topology file; requests
// that keep out of the environment (ncclEnv false) do not count.
func asksTopology(c *v1alpha1.RdmaConfig) bool {
	if c.NCCLEnv != nil && !*c.NCCLEnv {
		return false
	}
	f := c.Fabric
	return f != nil && f.TopologyFile != nil && *f.TopologyFile
}

// wantsTopologyFile reports whether any request of the claim asks for the topology file.
func wantsTopologyFile(configs []*v1alpha1.RdmaConfig) bool {
	return slices.ContainsFunc(configs, asksTopology)
}

// WantsTopology reports whether the claim's devices ask for an NCCL topology file, so
// that the plugin builds one before it writes the spec. It runs on every prepare and
// allocates nothing.
func WantsTopology(devices []ClaimDevice) bool {
	for i := range devices {
		if asksTopology(&devices[i].Config) {
			return true
		}
	}
	return false
}

// WriteTopology writes the claim's NCCL topology file atomically, before its spec (which
// mounts it) is written; Remove removes it with the spec.
func (w *Writer) WriteTopology(ctx context.Context, claimUID string, xml []byte) error {
	if err := ValidateClaimUID(claimUID); err != nil {
		return err
	}
	if w.opts.TopologyDir == "" {
		return errors.New("the claim asks for an NCCL topology file (fabric.topologyFile), and this plugin has no directory for them")
	}
	if err := os.MkdirAll(w.opts.TopologyDir, 0o755); err != nil {
		return fmt.Errorf("create the NCCL topology directory: %w", err)
	}
	name := TopologyFile(w.opts.TopologyDir, claimUID)
	if err := atomicfile.WriteFile(name, xml, 0o644); err != nil {
		return fmt.Errorf("write the NCCL topology file: %w", err)
	}
	logger(ctx).V(2).Info("Wrote NCCL topology file", "claim", claimUID, "path", name)
	return nil
}

// removeTopology removes the claim's topology file; a missing one is no error.
func (w *Writer) removeTopology(claimUID string) (bool, error) {
	if w.opts.TopologyDir == "" {
		return false, nil
	}
	err := os.Remove(TopologyFile(w.opts.TopologyDir, claimUID))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("remove the NCCL topology file: %w", err)
	}
}
