package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/claimgen"
)

// claimConfig is the claim command's configuration: the flags' values, converted to
// claimgen.Options once they are all read.
type claimConfig struct {
	Kind, Name, Namespace string
	GPUs, NICs            int
	Align                 string
	GPUClass, NICClass    string
	DistinctRails         bool
	GPUDirect             string
}

func claimCommand() *cli.Command {
	cfg := &claimConfig{}
	return &cli.Command{
		Name:  "claim",
		Usage: "print a ResourceClaimTemplate for N GPUs and M NICs, each NIC on the PCIe root (or NUMA node) of its GPUs",
		Description: "Writes one request per device, gpu-0..gpu-<N-1> and nic-0..nic-<M-1>, and per NIC one\n" +
			"matchAttribute constraint over it and its GPUs (N/M of them), so that the allocation says\n" +
			"which NIC went with which GPU. Nothing is sent to a cluster: pipe it to kubectl apply -f -.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: claimgen.FlagKind, Usage: claimgen.Choices(claimgen.Kinds), Value: string(claimgen.DefaultKind), EnvVars: []string{"CLAIM_KIND"}, Destination: &cfg.Kind},
			&cli.StringFlag{Name: claimgen.FlagName, Usage: "the object's name", DefaultText: "gpu-nic-<gpus>x<nics>", EnvVars: []string{"CLAIM_NAME"}, Destination: &cfg.Name},
			&cli.StringFlag{Name: claimgen.FlagNamespace, Usage: "the object's namespace; none by default, kubectl's then", EnvVars: []string{"CLAIM_NAMESPACE"}, Destination: &cfg.Namespace},
			&cli.IntFlag{Name: claimgen.FlagGPUs, Usage: "GPUs, 1 to " + strconv.Itoa(claimgen.MaxDevices) + "; required", DefaultText: "none", EnvVars: []string{"CLAIM_GPUS"}, Destination: &cfg.GPUs},
			&cli.IntFlag{Name: claimgen.FlagNICs, Usage: "NICs (RDMA ports), 1 to " + strconv.Itoa(claimgen.MaxDevices) + "; with --align pcie or numa, --gpus must be a multiple of it", DefaultText: "--gpus", EnvVars: []string{"CLAIM_NICS"}, Destination: &cfg.NICs},
			&cli.StringFlag{Name: claimgen.FlagAlign, Usage: "what each NIC shares with its GPUs: " + claimgen.Choices(claimgen.Aligns) + " (its PCIe root, its NUMA node, nothing)", Value: string(claimgen.DefaultAlign), EnvVars: []string{"CLAIM_ALIGN"}, Destination: &cfg.Align},
			&cli.StringFlag{Name: claimgen.FlagGPUClass, Usage: "the GPUs' DeviceClass", Value: claimgen.DefaultGPUClass, EnvVars: []string{"CLAIM_GPU_CLASS"}, Destination: &cfg.GPUClass},
			&cli.StringFlag{Name: claimgen.FlagNICClass, Usage: "the NICs' DeviceClass", Value: claimgen.DefaultNICClass, EnvVars: []string{"CLAIM_NIC_CLASS"}, Destination: &cfg.NICClass},
			&cli.BoolFlag{Name: claimgen.FlagDistinctRails, Usage: "each NIC on another rail (distinctAttribute rdma.dra.io/rail)", EnvVars: []string{"CLAIM_DISTINCT_RAILS"}, Destination: &cfg.DistinctRails},
			&cli.StringFlag{Name: claimgen.FlagGPUDirect, Usage: "only NICs with GPUDirect RDMA: " + claimgen.Choices(claimgen.GPUDirects), EnvVars: []string{"CLAIM_GPUDIRECT"}, Destination: &cfg.GPUDirect},
		},
		Action: func(c *cli.Context) error {
			if err := cliflags.NoArgs(c, nil); err != nil {
				return err
			}
			return runClaim(c, cfg)
		},
	}
}

func runClaim(c *cli.Context, cfg *claimConfig) error {
	if !c.IsSet(claimgen.FlagGPUs) {
		return cliflags.Usagef("--%s is required (1 to %d)", claimgen.FlagGPUs, claimgen.MaxDevices)
	}
	o := claimgen.Options{
		Kind: claimgen.Kind(cfg.Kind), Name: cfg.Name, Namespace: cfg.Namespace,
		GPUs: cfg.GPUs, NICs: cfg.NICs, Align: claimgen.Align(cfg.Align),
		GPUClass: cfg.GPUClass, NICClass: cfg.NICClass,
		DistinctRails: cfg.DistinctRails, GPUDirect: claimgen.GPUDirect(cfg.GPUDirect),
	}
	if !c.IsSet(claimgen.FlagNICs) {
		o.NICs = o.GPUs
	}
	if o.Name == "" {
		o.Name = claimgen.DefaultName(o.GPUs, o.NICs)
	}
	if err := o.Validate(); err != nil {
		return cliflags.Usagef("%v", err)
	}
	for _, w := range o.Warnings() {
		warnf(c, "%s", w)
	}
	out, err := claimgen.Generate(o)
	if err != nil {
		return fmt.Errorf("write the %s: %w", o.Kind, err)
	}
	_, err = c.App.Writer.Write(out)
	return err
}
