package cdi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

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

// wantsTopologyFile reports whether a request that takes part in the environment asks
// for the topology file.
func wantsTopologyFile(devices []ClaimDevice, configs []*v1alpha1.RdmaConfig) bool {
	for i := range devices {
		c := configs[i]
		if c.NCCLEnv != nil && !*c.NCCLEnv {
			continue
		}
		if f := c.Fabric; f != nil && f.TopologyFile != nil && *f.TopologyFile {
			return true
		}
	}
	return false
}

// WantsTopology reports whether the claim's devices ask for an NCCL topology file, so
// that the plugin builds one before it writes the spec.
func WantsTopology(devices []ClaimDevice) bool {
	configs := make([]*v1alpha1.RdmaConfig, len(devices))
	for i := range devices {
		configs[i] = &devices[i].Config
	}
	return wantsTopologyFile(devices, configs)
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
