package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

// migrateConfig is what the migrate command needs.
type migrateConfig struct {
	sharedFile, sriovFile, resourcePrefix string
	allowWidening                         []string
	existingFile, chartValuesFile         string
	kubeconfig                            string
	previewRoot                           string
}

func migrateCommand() *cli.Command {
	cfg := &migrateConfig{}
	allow := &cli.StringSlice{}
	return &cli.Command{
		Name:  "migrate",
		Usage: "print RdmaPools that replace a device plugin's resources; notes and problems go to stderr",
		Description: "Reads a k8s-rdma-shared-dev-plugin or sriov-network-device-plugin config.json, a ConfigMap holding it\n" +
			"under data.\"config.json\", or a NicClusterPolicy ('-' reads stdin), and prints one RdmaPool per resource that\n" +
			"serves the same extended resource name. A pool never selects more than the entry did: whatever would widen\n" +
			"the selection, and names already taken (the chart's default pools, --existing objects), are problems; then\n" +
			"nothing is printed and the exit status is 2. --dry-run-against-node compares, port by port, what the plugin\n" +
			"selected on a node and what the pools select.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from-shared-dev-plugin", Usage: "k8s-rdma-shared-dev-plugin configuration `FILE`", EnvVars: []string{"FROM_SHARED_DEV_PLUGIN"}, Destination: &cfg.sharedFile, TakesFile: true},
			&cli.StringFlag{Name: "from-sriov-device-plugin", Usage: "sriov-network-device-plugin configuration `FILE`; only isRdma resources are converted", EnvVars: []string{"FROM_SRIOV_DEVICE_PLUGIN"}, Destination: &cfg.sriovFile, TakesFile: true},
			&cli.StringFlag{Name: "resource-prefix", Usage: "prefix of entries without resourcePrefix (the SR-IOV plugin's -resource-prefix)", DefaultText: "rdma for the shared-dev-plugin, intel.com for the SR-IOV plugin", EnvVars: []string{"RESOURCE_PREFIX"}, Destination: &cfg.resourcePrefix},
			&cli.StringSliceFlag{Name: "allow-widening", Usage: "accept one widening a problem names, as `RESOURCE:FIELD` (repeat for each)", EnvVars: []string{"ALLOW_WIDENING"}, Destination: allow},
			&cli.StringFlag{Name: "existing", Usage: "`FILE` of the cluster's DeviceClasses and RdmaPools (kubectl get deviceclasses,rdmapools -o yaml), checked for names the pools would collide with", EnvVars: []string{"EXISTING"}, Destination: &cfg.existingFile, TakesFile: true},
			&cli.StringFlag{Name: "kubeconfig", Usage: "read the cluster's DeviceClasses and RdmaPools with this kubeconfig `FILE`, like --existing (read only)", EnvVars: []string{"KUBECONFIG"}, Destination: &cfg.kubeconfig, TakesFile: true},
			&cli.StringFlag{Name: "chart-values", Usage: "the values `FILE` the chart is installed with, for its pools' names", DefaultText: "the chart's defaults", EnvVars: []string{"CHART_VALUES"}, Destination: &cfg.chartValuesFile, TakesFile: true},
			&cli.StringFlag{Name: "dry-run-against-node", Usage: "instead of the pools, print per port of the node below this sysfs `ROOT` what the plugin selected and what the pools select", EnvVars: []string{"DRY_RUN_AGAINST_NODE"}, Destination: &cfg.previewRoot, TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			if err := cliflags.NoArgs(c, func(arg string) string {
				if st, err := os.Stat(arg); err == nil && !st.IsDir() {
					return fmt.Sprintf("did you mean %s %s or %s %s?", migrate.FlagShared, arg, migrate.FlagSRIOV, arg)
				}
				return ""
			}); err != nil {
				return err
			}
			cfg.allowWidening = allow.Value()
			return runMigrate(c, cfg)
		},
	}
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// runMigrate converts one file and writes pools (or the preview) to stdout and notes
// and problems to stderr.
func runMigrate(c *cli.Context, cfg *migrateConfig) error {
	if (cfg.sharedFile == "") == (cfg.sriovFile == "") {
		return cliflags.Usagef("give exactly one of %s and %s", migrate.FlagShared, migrate.FlagSRIOV)
	}
	file := cfg.sharedFile + cfg.sriovFile
	if file == "-" && cfg.existingFile == "-" {
		return cliflags.Usagef("only one of the input and --existing can be read from stdin")
	}
	data, err := readInput(file, c.App.Reader)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	opts := migrate.Options{ResourcePrefix: cfg.resourcePrefix, AllowWidening: cfg.allowWidening}
	var res *migrate.Result
	if cfg.sharedFile != "" {
		res, err = migrate.FromSharedDevicePlugin(data, opts)
	} else {
		res, err = migrate.FromSRIOVDevicePlugin(data, opts)
	}
	if err != nil {
		return cliflags.Usagef("%s: %v", file, err)
	}
	claimants := migrate.ChartDefaultPools()
	if cfg.chartValuesFile != "" {
		data, err := os.ReadFile(cfg.chartValuesFile)
		if err != nil {
			return fmt.Errorf("read chart values: %w", err)
		}
		if claimants, err = migrate.ChartPools(data, cfg.chartValuesFile); err != nil {
			return cliflags.Usagef("%v", err)
		}
	}
	if cfg.existingFile != "" {
		data, err := readInput(cfg.existingFile, c.App.Reader)
		if err != nil {
			return fmt.Errorf("read existing objects: %w", err)
		}
		existing, err := migrate.ExistingObjects(data, cfg.existingFile)
		if err != nil {
			return cliflags.Usagef("%v", err)
		}
		claimants = append(claimants, existing...)
	}
	if cfg.kubeconfig != "" {
		client, err := clusterClient(cfg.kubeconfig)
		if err != nil {
			return err
		}
		existing, err := clusterObjects(c.Context, client, "the cluster of "+cfg.kubeconfig)
		if err != nil {
			return err
		}
		claimants = append(claimants, existing...)
	}
	res.CheckConflicts(claimants)
	if err := unaccepted(opts.AllowWidening, res); err != nil {
		return err
	}

	if cfg.previewRoot != "" {
		if err := writePreview(c, cfg.previewRoot, res); err != nil {
			return err
		}
	} else if len(res.Problems) == 0 {
		out, err := migrate.WriteYAML(res.Pools)
		if err != nil {
			return err
		}
		if _, err := c.App.Writer.Write(out); err != nil {
			return err
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintln(c.App.ErrWriter, "note:", n)
	}
	if len(res.Problems) > 0 {
		for _, p := range res.Problems {
			fmt.Fprintln(c.App.ErrWriter, "error:", p)
		}
		what := "no pools written"
		if cfg.previewRoot != "" {
			what = "the preview shows the pools as they would be with every widening accepted"
		}
		noun := "problems"
		if len(res.Problems) == 1 {
			noun = "problem"
		}
		return cliflags.Usagef("%d %s above; %s", len(res.Problems), noun, what)
	}
	return nil
}

// unaccepted refuses --allow-widening values that name no widening: a typo there would
// otherwise accept nothing without a word.
func unaccepted(allowed []string, res *migrate.Result) error {
	var keys []string
	for _, p := range res.Problems {
		keys = append(keys, p.WideningKey)
	}
	keys = append(keys, res.Accepted...)
	for _, a := range allowed {
		found := false
		for _, k := range keys {
			found = found || k == a
		}
		if !found {
			msg := fmt.Sprintf("--allow-widening %s names no widening of this input", a)
			if s := cliflags.Nearest(a, keys); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			return cliflags.Usagef("%s", msg)
		}
	}
	return nil
}

// writePreview prints, per port of the node, OLD/NEW per resource.
func writePreview(c *cli.Context, root string, res *migrate.Result) error {
	inv, err := discoverAt(c, root)
	if err != nil {
		return err
	}
	rows, err := migrate.Preview(c.Context, res, inv, migrate.SysfsPCIFacts(root))
	if err != nil {
		return fmt.Errorf("preview: %w", err)
	}
	sortRows(rows)
	w := c.App.Writer
	fmt.Fprintf(w, "node: %s   ports: %d   cells: device plugin/pool; UPPER CASE where they differ\n", root, len(inv.Ports))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "PORT\tNETDEV\tLINK\tPCI"
	for _, e := range res.Entries {
		head += "\t" + e.Resource
	}
	fmt.Fprintln(tw, head)
	type count struct {
		old, new, unknown int
		wider, narrower   []string
	}
	counts := make([]count, len(res.Entries))
	for _, r := range rows {
		p := r.Port
		line := fmt.Sprintf("%s/%d\t%s\t%s\t%s", p.IBDev, p.Port, orDash(p.Netdev), orDash(p.LinkLayer), orDash(p.PCIBusID))
		for i := range res.Entries {
			line += "\t" + previewCell(r.Old[i], r.New[i])
			name := fmt.Sprintf("%s/%d", p.IBDev, p.Port)
			switch {
			case r.Old[i] == migrate.Unknown:
				counts[i].unknown++
			case r.Old[i] == migrate.Yes && !r.New[i]:
				counts[i].narrower = append(counts[i].narrower, name)
			case r.Old[i] == migrate.No && r.New[i]:
				counts[i].wider = append(counts[i].wider, name)
			}
			if r.Old[i] == migrate.Yes {
				counts[i].old++
			}
			if r.New[i] {
				counts[i].new++
			}
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, e := range res.Entries {
		n := counts[i]
		verdict := "same ports"
		switch {
		case len(n.wider) > 0:
			verdict = "WIDER: only the pool selects " + strings.Join(n.wider, ", ")
			warnf(c, "pool %s selects ports the device plugin did not: %s", e.Pool, strings.Join(n.wider, ", "))
		case n.unknown > 0:
			verdict = fmt.Sprintf("%d port(s) unknown: the entry uses selectors without equivalent", n.unknown)
		case len(n.narrower) > 0:
			verdict = "narrower: only the device plugin selected " + strings.Join(n.narrower, ", ")
		}
		fmt.Fprintf(w, "%s (pool %s): device plugin %d, pool %d: %s\n", e.Resource, e.Pool, n.old, n.new, verdict)
	}
	return nil
}

func previewCell(old migrate.Verdict, new bool) string {
	o := map[migrate.Verdict]string{migrate.Yes: "yes", migrate.No: "no", migrate.Unknown: "?"}[old]
	n := "no"
	if new {
		n = "yes"
	}
	if (old == migrate.Yes) != new && old != migrate.Unknown {
		return strings.ToUpper(o + "/" + n)
	}
	return o + "/" + n
}

// discoverAt scans the node below root and warns about a root that is no sysfs tree.
func discoverAt(c *cli.Context, root string) (*discovery.Inventory, error) {
	d := discovery.New(discovery.Options{SysfsRoot: root, UseNetlink: isLiveRoot(root)})
	inv, err := d.Discover(c.Context)
	if err != nil {
		return nil, err
	}
	warnEmptyRoot(c, root, inv)
	return inv, nil
}
