package discovery

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// The NVIDIA driver's modules as sysfs shows them (sysfs.md, "GPUDirect RDMA").
const (
	nvidiaModule      = "module/nvidia"
	nvidiaModuleTaint = nvidiaModule + "/taint"
	peermemModule     = "module/nvidia_peermem"
)

// dmaBufDrivers are the PCI drivers of RDMA devices that are trusted to register dma-buf
// memory regions, which GPUDirect RDMA through dma-buf needs (ibv_reg_dmabuf_mr): mlx5
// does since Linux 5.12, and it is what NVIDIA documents GPUDirect RDMA with. Other
// drivers implement the verb in recent kernels (bnxt_re, irdma, efa, mana_ib), but which
// kernel a node runs is not in sysfs and none of them has been checked here.
var dmaBufDrivers = map[string]bool{"mlx5_core": true}

// peermemDrivers are the PCI drivers of RDMA devices whose memory registration goes
// through the peer-memory clients nvidia_peermem registers with: mlx5 under the
// MLNX_OFED/DOCA-OFED ib_core, which nvidia_peermem needs to load at all.
var peermemDrivers = map[string]bool{"mlx5_core": true}

// RegistersGPUMemory reports whether the RDMA devices of the PCI driver drv are trusted
// to register GPU memory in some way (dma-buf or peer memory), given the NVIDIA driver
// for it; for other ports the NVIDIA driver's modules make no difference.
func RegistersGPUMemory(drv string) bool { return dmaBufDrivers[drv] || peermemDrivers[drv] }

// GPUDriver is what sysfs says of the NVIDIA GPU driver: with the port itself, the input
// of GPUDirect readiness (GPUDriver.GPUDirect). Discovery and rdma-dra doctor read it the
// same way, so the published attribute and the doctor's verdict cannot disagree.
type GPUDriver struct {
	// Loaded is true when module/nvidia exists: the NVIDIA driver is loaded.
	Loaded bool
	// Taint is module/nvidia/taint: P for the proprietary modules; NVIDIA's open kernel
	// modules are dual MIT/GPL and taint O (out of tree) at most. Valid when TaintKnown.
	Taint string
	// TaintKnown is false when the driver is not loaded or its taint file is missing or
	// garbled; the modules then count as proprietary.
	TaintKnown bool
	// Peermem is true when module/nvidia_peermem exists, the file NCCL and UCX look for
	// (module/nvidia_peermem/version) being inside it.
	Peermem bool
}

// ReadGPUDriver reads the NVIDIA driver's modules below the root of f. The error says
// why the taint of a loaded driver could not be read; the GPUDriver is usable all the
// same (its modules count as proprietary).
func ReadGPUDriver(f *sysfs.FS) (GPUDriver, error) {
	d := GPUDriver{Loaded: f.Exists(nvidiaModule), Peermem: f.Exists(peermemModule)}
	if !d.Loaded {
		return d, nil
	}
	taint, err := sysfs.Read(f, nvidiaModuleTaint, sysfs.ParseTaint)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("read %s: %w", nvidiaModuleTaint, err)
		}
		return d, err
	}
	d.Taint, d.TaintKnown = taint, true
	return d, nil
}

// OpenModules reports whether the loaded driver is NVIDIA's open kernel modules, the
// only ones whose GPU memory the kernel's dma-buf can export: loaded, with a taint that
// is known and has no P.
func (d GPUDriver) OpenModules() bool {
	return d.Loaded && d.TaintKnown && !strings.Contains(d.Taint, "P")
}

// GPUDirect returns how GPU memory can be registered with port p for GPUDirect RDMA,
// GPUDirectDMABuf, GPUDirectPeermem or "" for neither, and why, in words for rdma-dra
// doctor. The rules (sysfs.md):
//
//   - no NVIDIA driver loaded, or p a virtual device (soft-RoCE, soft-iWARP, which have
//     no DMA engine of their own): neither;
//   - NVIDIA's open kernel modules and a port driver in dmaBufDrivers: dma-buf;
//   - else nvidia_peermem loaded and a port driver in peermemDrivers: peer memory;
//   - else neither.
//
// dma-buf comes first where both work, as in NCCL, which registers through dma-buf
// whenever the GPU and NIC drivers support it (NCCL_DMABUF_ENABLE, on by default) and
// through peer memory otherwise.
func (d GPUDriver) GPUDirect(p *Port) (mode, why string) {
	switch {
	case !d.Loaded:
		return "", "no NVIDIA driver loaded (no " + nvidiaModule + ")"
	case p.Virtual:
		return "", "a virtual RDMA device (soft-RoCE, soft-iWARP) has no DMA engine to reach GPU memory"
	case d.OpenModules() && dmaBufDrivers[p.Driver]:
		return GPUDirectDMABuf, "dma-buf: NVIDIA open kernel modules and " + p.Driver
	case d.Peermem && peermemDrivers[p.Driver]:
		return GPUDirectPeermem, "peer memory: nvidia_peermem loaded and " + p.Driver
	case !RegistersGPUMemory(p.Driver):
		drv := p.Driver
		if drv == "" {
			drv = "unknown"
		}
		return "", fmt.Sprintf("driver %s is not known to register GPU memory (mlx5_core is)", drv)
	case !d.TaintKnown:
		return "", "the NVIDIA driver's taint cannot be read (so it counts as proprietary) and nvidia_peermem is not loaded"
	}
	return "", fmt.Sprintf("proprietary NVIDIA kernel modules (taint %s), which export no dma-buf, and nvidia_peermem is not loaded", d.Taint)
}
