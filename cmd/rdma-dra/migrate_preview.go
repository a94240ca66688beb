package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

// writeNodePreview prints, per port of the node below root, plugin/pool per resource,
// then one line per resource, and judges the differences into res's problems. values
// are the chart values whose nodeConfig the node runs with, the legacy resources merged.
func writeNodePreview(c *cli.Context, root string, res *migrate.Result, values []byte, opts migrate.Options) error {
	inv, err := discoverAt(c, root)
	if err != nil {
		return err
	}
	nodeCfg, err := migrate.NodeConfigFor(res, values)
	if err != nil {
		return cliflags.Usagef("node configuration of the preview: %v", err)
	}
	rows, err := migrate.Preview(c.Context, res, inv, migrate.SysfsPCIFacts(root), nodeCfg)
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
	for _, r := range rows {
		p := r.Port
		line := fmt.Sprintf("%s/%d\t%s\t%s\t%s", p.IBDev, p.Port, orDash(p.Netdev), orDash(p.LinkLayer), orDash(p.PCIBusID))
		for i := range res.Entries {
			line += "\t" + previewCell(r.Old[i], r.New[i])
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	findings := migrate.NodeFindings(res, rows, root)
	for _, f := range findings {
		fmt.Fprintf(w, "%s (pool %s): device plugin %s, pool %s: %s\n", f.Resource, f.Pool, f.PluginSide, f.PoolSide, f.Verdict())
	}
	res.Judge(findings, opts)
	return nil
}

// writeClusterPreview prints one row per node and resource: what the device plugin
// advertises, what the pool would serve, and the verdict; and judges the differences.
func writeClusterPreview(c *cli.Context, clients *kubeClients, cfg *migrateConfig, res *migrate.Result, opts migrate.Options) error {
	findings, err := migrate.ClusterPreview(c.Context, res, clients.kube, migrate.ClusterOptions{DriverName: cfg.driverName, NodeSelector: cfg.nodeSelector})
	if err != nil {
		return fmt.Errorf("dry run against the cluster of %s: %w", clients.source, err)
	}
	w := c.App.Writer
	if len(findings) == 0 {
		fmt.Fprintln(w, "no node advertises these resources or has ResourceSlices of the driver")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tRESOURCE\tPOOL\tDEVICE PLUGIN\tPOOL SERVES\tVERDICT")
		for _, f := range findings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Node, f.Resource, f.Pool, f.PluginSide, f.PoolSide, f.Verdict())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	res.Judge(findings, opts)
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
