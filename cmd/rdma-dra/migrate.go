package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

// exitWider is migrate's exit status when every problem is a widening that
// --allow-widening or --allow-wider can accept; any other problem makes it ExitUsage.
const exitWider = 3

// migrateConfig is what the migrate command needs.
type migrateConfig struct {
	sharedFile, sriovFile, resourcePrefix string
	allowWidening, allowWider             []string
	existingFile, chartValuesFile         string
	kubeconfig                            string
	previewRoot                           string
	previewCluster                        bool
	nodeSelector, driverName              string
	valuesOut, nodeConfigOut              string
}

func migrateCommand() *cli.Command {
	cfg := &migrateConfig{}
	allow, allowWider := &cli.StringSlice{}, &cli.StringSlice{}
	return &cli.Command{
		Name:  "migrate",
		Usage: "print RdmaPools that replace a device plugin's resources, and write the node configuration they need; notes and problems go to stderr",
		Description: "Reads a k8s-rdma-shared-dev-plugin or sriov-network-device-plugin config.json, a ConfigMap holding it\n" +
			"under data.\"config.json\", or a NicClusterPolicy ('-' reads stdin), and prints one RdmaPool per resource that\n" +
			"serves the same extended resource name with the same unit: a legacy pool per shared-dev-plugin resource (its\n" +
			"legacyResources entry goes to --values-out or --node-config-out), an exclusive pool per SR-IOV resource.\n" +
			"A pool never selects more than the entry did: whatever would widen the selection, what the plugin itself\n" +
			"refused, and names already taken are problems; then nothing is written, and the exit status is 3 when every\n" +
			"problem is a widening a flag can accept, else 2. --dry-run-against-node compares, port by port, what the plugin\n" +
			"selected on a node and what the pools select; --dry-run-against-cluster compares every node's advertised\n" +
			"resources with the devices the driver publishes there.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from-shared-dev-plugin", Usage: "k8s-rdma-shared-dev-plugin configuration `FILE`", EnvVars: []string{"FROM_SHARED_DEV_PLUGIN"}, Destination: &cfg.sharedFile, TakesFile: true},
			&cli.StringFlag{Name: "from-sriov-device-plugin", Usage: "sriov-network-device-plugin configuration `FILE`; only isRdma resources are converted", EnvVars: []string{"FROM_SRIOV_DEVICE_PLUGIN"}, Destination: &cfg.sriovFile, TakesFile: true},
			&cli.StringFlag{Name: "resource-prefix", Usage: "prefix of entries without resourcePrefix (the SR-IOV plugin's --resource-prefix)", DefaultText: "rdma for the shared-dev-plugin, intel.com for the SR-IOV plugin, also in a NicClusterPolicy", EnvVars: []string{"RESOURCE_PREFIX"}, Destination: &cfg.resourcePrefix},
			&cli.StringSliceFlag{Name: "allow-widening", Usage: "accept one widening of the conversion a problem names, as `RESOURCE:FIELD` (repeat for each)", EnvVars: []string{"ALLOW_WIDENING"}, Destination: allow},
			&cli.StringSliceFlag{Name: "allow-wider", Usage: "accept that a dry run finds the pool of extended resource `NAME` serving more than the device plugin did (repeat for each)", EnvVars: []string{"ALLOW_WIDER"}, Destination: allowWider},
			&cli.StringFlag{Name: "values-out", Usage: "write the chart's values with nodeConfig.legacyResources merged in (over --chart-values) to `FILE`", EnvVars: []string{"VALUES_OUT"}, Destination: &cfg.valuesOut, TakesFile: true},
			&cli.StringFlag{Name: "node-config-out", Usage: "write a complete node configuration file with the legacyResources (over --chart-values' nodeConfig) to `FILE`, for static installs", EnvVars: []string{"NODE_CONFIG_OUT"}, Destination: &cfg.nodeConfigOut, TakesFile: true},
			&cli.StringFlag{Name: "existing", Usage: "`FILE` of the cluster's DeviceClasses and RdmaPools (kubectl get deviceclasses,rdmapools -o yaml), checked for names the pools would collide with", EnvVars: []string{"EXISTING"}, Destination: &cfg.existingFile, TakesFile: true},
			&cli.StringFlag{Name: "kubeconfig", Usage: "read the cluster's DeviceClasses and RdmaPools with this kubeconfig `FILE`, like --existing (read only)", EnvVars: []string{"KUBECONFIG"}, Destination: &cfg.kubeconfig, TakesFile: true},
			&cli.StringFlag{Name: "chart-values", Usage: "the values `FILE` the chart is installed with, for its pools' names and its nodeConfig", DefaultText: "the chart's defaults", EnvVars: []string{"CHART_VALUES"}, Destination: &cfg.chartValuesFile, TakesFile: true},
			&cli.StringFlag{Name: "dry-run-against-node", Usage: "instead of the pools, print per port of the node below this sysfs `ROOT` what the plugin selected and what the pools select", EnvVars: []string{"DRY_RUN_AGAINST_NODE"}, Destination: &cfg.previewRoot, TakesFile: true},
			&cli.BoolFlag{Name: "dry-run-against-cluster", Usage: "instead of the pools, print per node (--kubeconfig, read only) what the device plugin advertises and what the pools would serve from the driver's ResourceSlices", EnvVars: []string{"DRY_RUN_AGAINST_CLUSTER"}, Destination: &cfg.previewCluster},
			&cli.StringFlag{Name: "node-selector", Usage: "with --dry-run-against-cluster, compare only the nodes with these labels (`SELECTOR`, as kubectl -l)", EnvVars: []string{"NODE_SELECTOR"}, Destination: &cfg.nodeSelector},
			&cli.StringFlag{Name: "driver", Usage: "with --dry-run-against-cluster, the DRA driver name its ResourceSlices carry", Value: devicemodel.DefaultDriverName, EnvVars: []string{"DRIVER_NAME"}, Destination: &cfg.driverName},
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
			cfg.allowWidening, cfg.allowWider = allow.Value(), allowWider.Value()
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

// check refuses flags that do not go together.
func (cfg *migrateConfig) check() error {
	if (cfg.sharedFile == "") == (cfg.sriovFile == "") {
		return cliflags.Usagef("give exactly one of %s and %s", migrate.FlagShared, migrate.FlagSRIOV)
	}
	if cfg.sharedFile+cfg.sriovFile == "-" && cfg.existingFile == "-" {
		return cliflags.Usagef("only one of the input and --existing can be read from stdin")
	}
	dryRun := cfg.previewRoot != "" || cfg.previewCluster
	switch {
	case cfg.previewRoot != "" && cfg.previewCluster:
		return cliflags.Usagef("give one of --dry-run-against-node and --dry-run-against-cluster")
	case dryRun && (cfg.valuesOut != "" || cfg.nodeConfigOut != ""):
		return cliflags.Usagef("a dry run writes nothing: --values-out and --node-config-out go with a run without --dry-run-against-*")
	case !dryRun && len(cfg.allowWider) > 0:
		return cliflags.Usagef("--allow-wider accepts what a dry run finds: give --dry-run-against-node or --dry-run-against-cluster")
	case !cfg.previewCluster && cfg.nodeSelector != "":
		return cliflags.Usagef("--node-selector goes with --dry-run-against-cluster")
	case !cfg.previewCluster && cfg.driverName != devicemodel.DefaultDriverName:
		return cliflags.Usagef("--driver goes with --dry-run-against-cluster")
	}
	return nil
}

// runMigrate converts one file and writes pools (or the preview) to stdout, the node
// side to --values-out and --node-config-out, and notes and problems to stderr.
func runMigrate(c *cli.Context, cfg *migrateConfig) error {
	if err := cfg.check(); err != nil {
		return err
	}
	file := cfg.sharedFile + cfg.sriovFile
	data, err := readInput(file, c.App.Reader)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	opts := migrate.Options{ResourcePrefix: cfg.resourcePrefix, InputName: file, AllowWidening: cfg.allowWidening, AllowWider: cfg.allowWider}
	var res *migrate.Result
	if cfg.sharedFile != "" {
		res, err = migrate.FromSharedDevicePlugin(data, opts)
	} else {
		res, err = migrate.FromSRIOVDevicePlugin(data, opts)
	}
	if err != nil {
		return cliflags.Usagef("%s: %v", file, err)
	}
	var values []byte
	claimants := migrate.ChartDefaultPools()
	if cfg.chartValuesFile != "" {
		if values, err = os.ReadFile(cfg.chartValuesFile); err != nil {
			return fmt.Errorf("read chart values: %w", err)
		}
		if claimants, err = migrate.ChartPools(values, cfg.chartValuesFile); err != nil {
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
	var clients *kubeClients
	if cfg.kubeconfig != "" || cfg.previewCluster {
		if clients, err = newKubeClients(cfg.kubeconfig); err != nil {
			return err
		}
		existing, err := clusterObjects(c.Context, clients.dynamic, "the cluster of "+clients.source)
		if err != nil {
			return err
		}
		claimants = append(claimants, existing...)
	}
	res.CheckConflicts(claimants)
	if err := unaccepted(migrate.FlagAllowWidening, opts.AllowWidening, res); err != nil {
		return err
	}

	var out []byte
	var files []outFile
	switch {
	case cfg.previewRoot != "":
		if err := writeNodePreview(c, cfg.previewRoot, res, values, opts); err != nil {
			return err
		}
	case cfg.previewCluster:
		if err := writeClusterPreview(c, clients, cfg, res, opts); err != nil {
			return err
		}
	default:
		res.CheckNodeSide(cfg.valuesOut != "" || cfg.nodeConfigOut != "")
		if len(res.Problems) == 0 {
			if out, err = migrate.WriteYAML(res.Pools); err != nil {
				return err
			}
			if files, err = nodeSide(cfg, values, res); err != nil {
				return err
			}
		}
	}
	if err := unaccepted(migrate.FlagAllowWider, opts.AllowWider, res); err != nil {
		return err
	}
	for _, n := range res.Notes {
		fmt.Fprintln(c.App.ErrWriter, "note:", n)
	}
	if len(res.Problems) > 0 {
		return problemsError(c, cfg, res.Problems)
	}
	// Files first: when one cannot be written, no pools reach stdout.
	for _, f := range files {
		if err := os.WriteFile(f.name, f.data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	_, err = c.App.Writer.Write(out)
	return err
}

// outFile is a file migrate writes once there is no problem.
type outFile struct {
	name string
	data []byte
}

// nodeSide renders the node side of the legacy pools for --values-out and
// --node-config-out, over the chart values.
func nodeSide(cfg *migrateConfig, values []byte, res *migrate.Result) ([]outFile, error) {
	base := cfg.chartValuesFile
	if base == "" {
		base = "the node side"
	}
	var files []outFile
	if cfg.valuesOut != "" {
		data, err := migrate.Values(values, res.LegacyResources)
		if err != nil {
			return nil, cliflags.Usagef("%s: %v", base, err)
		}
		files = append(files, outFile{cfg.valuesOut, data})
	}
	if cfg.nodeConfigOut != "" {
		data, err := migrate.NodeConfig(values, res.LegacyResources)
		if err != nil {
			return nil, cliflags.Usagef("%s: %v", base, err)
		}
		files = append(files, outFile{cfg.nodeConfigOut, data})
	}
	return files, nil
}

// problemsError prints the problems and returns the error whose status says what they
// are: exitWider when every one is a widening a flag can accept, else ExitUsage.
func problemsError(c *cli.Context, cfg *migrateConfig, problems []migrate.Problem) error {
	for _, p := range problems {
		fmt.Fprintln(c.App.ErrWriter, "error:", p)
	}
	what := "nothing written"
	if cfg.previewRoot != "" || cfg.previewCluster {
		what = "the preview shows the pools as they would be with every widening of the conversion accepted"
	}
	noun := "problems"
	if len(problems) == 1 {
		noun = "problem"
	}
	if !slices.ContainsFunc(problems, func(p migrate.Problem) bool { return !p.Widens() }) {
		return &cliflags.StatusError{Status: exitWider, Err: fmt.Errorf("%d %s above, each a widening that %s or %s accepts by name; %s",
			len(problems), noun, migrate.FlagAllowWidening, migrate.FlagAllowWider, what)}
	}
	return cliflags.Usagef("%d %s above; %s", len(problems), noun, what)
}

// unaccepted refuses values of flag (--allow-widening, --allow-wider) that accept no
// widening: a typo there would otherwise accept nothing without a word.
func unaccepted(flag string, allowed []string, res *migrate.Result) error {
	var keys []string
	for _, p := range res.Problems {
		if p.Widens() && (p.Flag == flag || (p.Flag == "" && flag == migrate.FlagAllowWidening)) {
			keys = append(keys, p.WideningKey)
		}
	}
	keys = append(keys, res.Accepted...)
	for _, a := range allowed {
		if !slices.Contains(keys, a) {
			msg := fmt.Sprintf("%s %s names no widening of this input", flag, a)
			if flag == migrate.FlagAllowWider {
				var names []string
				for _, e := range res.Entries {
					names = append(names, e.Resource)
				}
				keys = append(keys, names...)
				msg = fmt.Sprintf("%s %s names no widening the dry run found", flag, a)
			}
			if s := cliflags.Nearest(a, keys); s != "" && s != a {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			return cliflags.Usagef("%s", strings.TrimSpace(msg))
		}
	}
	return nil
}
