package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/doctor"
)

// doctorConfig is the doctor command's configuration.
type doctorConfig struct {
	Host             doctor.Host
	CDIDirs          string
	Output           string
	WarningsAsErrors bool
}

func doctorCommand() *cli.Command {
	cfg := &doctorConfig{Host: doctor.DefaultHost()}
	h := &cfg.Host
	return &cli.Command{
		Name:  "doctor",
		Usage: "check this node's prerequisites for the driver and explain each finding",
		Description: "One line per check, OK, WARN, FAIL or SKIP, with what was found and, for WARN and FAIL, the fix:\n" +
			"kernel modules, RDMA devices and their character devices, port states, the RDMA netns mode,\n" +
			"RoCE GIDs, GPUDirect RDMA, and the container runtime's CDI, NRI and memlock settings. It only\n" +
			"reads, and only this node: nothing is asked of the API server. Exit status 1 when a check\n" +
			"fails (with --warnings-as-errors also when one warns). docs/cli.md lists the checks.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sysfs-root", Usage: "directory to read sysfs from, e.g. `DIR`/sys of a mock node", Value: h.SysfsRoot, Destination: &h.SysfsRoot, EnvVars: []string{"SYSFS_ROOT"}, TakesFile: true},
			&cli.StringFlag{Name: "dev-root", Usage: "the host's /dev, where infiniband/uverbsN and rdma_cm are", Value: h.DevRoot, Destination: &h.DevRoot, EnvVars: []string{"DEV_ROOT"}, TakesFile: true},
			&cli.StringFlag{Name: "proc-root", Usage: "the host's /proc, to find the container runtime's process and limits", Value: h.ProcRoot, Destination: &h.ProcRoot, EnvVars: []string{"PROC_ROOT"}, TakesFile: true},
			&cli.StringFlag{Name: "containerd-config", Usage: "containerd's config `FILE` (its imports are read too)", Value: h.ContainerdConfig, Destination: &h.ContainerdConfig, EnvVars: []string{"CONTAINERD_CONFIG"}, TakesFile: true},
			&cli.StringFlag{Name: "crio-config", Usage: "CRI-O's config `FILE`; FILE.d is read after it", Value: h.CRIOConfig, Destination: &h.CRIOConfig, EnvVars: []string{"CRIO_CONFIG"}, TakesFile: true},
			&cli.StringFlag{Name: "cdi-dirs", Usage: "comma-separated CDI spec directories the driver needs: the runtime must scan each, each must be writable", Value: strings.Join(doctor.DefaultCDIDirs, ","), Destination: &cfg.CDIDirs, EnvVars: []string{"CDI_DIRS"}},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output format: table, json or yaml", Value: outputTable, Destination: &cfg.Output, EnvVars: []string{"OUTPUT"}},
			&cli.BoolFlag{Name: "warnings-as-errors", Usage: "exit with status 1 when a check warns, not only when one fails", Destination: &cfg.WarningsAsErrors, EnvVars: []string{"WARNINGS_AS_ERRORS"}},
		},
		Action: func(c *cli.Context) error {
			if err := cliflags.NoArgs(c, sysfsRootHint); err != nil {
				return err
			}
			return runDoctor(c, cfg)
		},
	}
}

func runDoctor(c *cli.Context, cfg *doctorConfig) error {
	switch cfg.Output {
	case outputTable, outputJSON, outputYAML:
	default:
		return cliflags.Usagef("unknown output format %q: want table, json or yaml", cfg.Output)
	}
	h := cfg.Host
	h.CDIDirs = nil
	for _, d := range strings.Split(cfg.CDIDirs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			h.CDIDirs = append(h.CDIDirs, d)
		}
	}
	h.UseNetlink = isLiveRoot(h.SysfsRoot)
	results := doctor.Run(c.Context, h)

	w := c.App.Writer
	if cfg.Output == outputTable {
		if err := doctor.WriteText(w, results); err != nil {
			return err
		}
	} else {
		b, err := doctor.MarshalDocument(results)
		if err != nil {
			return err
		}
		if cfg.Output == outputYAML {
			if b, err = orderedYAML(b); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if failed := doctor.Named(results, doctor.Fail); len(failed) > 0 {
		return fmt.Errorf("%d of %d checks failed: %s", len(failed), len(results), strings.Join(failed, ", "))
	}
	if warned := doctor.Named(results, doctor.Warn); cfg.WarningsAsErrors && len(warned) > 0 {
		return fmt.Errorf("%d of %d checks warned (--warnings-as-errors): %s", len(warned), len(results), strings.Join(warned, ", "))
	}
	return nil
}
