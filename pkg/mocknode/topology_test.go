package mocknode

import (
	"encoding/xml"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nccltopo"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// xmlElement is any element of a topology file, for walking it.
type xmlElement struct {
	XMLName xml.Name
	Attrs   []xml.Attr   `xml:",any,attr"`
	Subs    []xmlElement `xml:",any"`
}

func (e *xmlElement) attr(name string) (string, bool) {
	for _, a := range e.Attrs {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// TestProfilesNCCLTopology builds from every profile's tree the NCCL topology file of all
// its ports and GPUs at once, as the kubelet plugin would for a claim of the whole node, so
// that a profile that lacks a platform fact fails: a bridge's files, a NUMA node's cpumap,
// the CPU type make Build fail; a missing link or cpumap is checked here, as Build takes
// files NCCL can do without. Every port of a PCI function must have its net (and its Data
// Direct net), every GPU its pci element, each below the cpu of its NUMA node.
func TestProfilesNCCLTopology(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			n := p.Node()
			dir := t.TempDir()
			if err := n.Write(dir, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			fsys, err := sysfs.Open(filepath.Join(dir, SysDir))
			if err != nil {
				t.Fatal(err)
			}
			ports := n.ExpectedPorts()
			var gpus []string
			for _, g := range n.GPUs {
				gpus = append(gpus, g.Address)
			}
			res, err := nccltopo.Build(fsys, nccltopo.Input{Ports: ports, GPUBusIDs: gpus})
			virtual := 0
			for _, port := range ports {
				if port.Virtual {
					virtual++
				}
			}
			if virtual == len(ports) && len(gpus) == 0 {
				if !errors.Is(err, nccltopo.ErrNothingToDescribe) || len(res.Skipped) != virtual {
					t.Fatalf("Build of virtual ports only = %v, skipped %v; want ErrNothingToDescribe, all skipped", err, res.Skipped)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if len(res.Skipped) != virtual {
				t.Errorf("skipped %v, want the %d virtual ports", res.Skipped, virtual)
			}
			var system xmlElement
			if err := xml.Unmarshal(res.XML, &system); err != nil {
				t.Fatalf("parse the file: %v\n%s", err, res.XML)
			}
			// The NUMA node (numaid) above every pci element and net.
			pcis, nets := map[string]string{}, map[string]string{}
			var walk func(numa string, e xmlElement)
			walk = func(numa string, e xmlElement) {
				switch e.XMLName.Local {
				case "pci":
					id, _ := e.attr("busid")
					pcis[id] = numa
					if s, _ := e.attr("link_speed"); s == "" {
						t.Errorf("pci %s: no link_speed", id)
					}
					if w, _ := e.attr("link_width"); w == "0" || w == "" {
						t.Errorf("pci %s: link_width %q", id, w)
					}
				case "net":
					name, _ := e.attr("name")
					nets[name] = numa
				}
				for _, s := range e.Subs {
					walk(numa, s)
				}
			}
			for _, cpu := range system.Subs {
				numa, _ := cpu.attr("numaid")
				if a, ok := cpu.attr("affinity"); !ok || a == "" {
					t.Errorf("cpu %s: no affinity", numa)
				}
				walk(numa, cpu)
			}
			for _, port := range ports {
				if port.Virtual {
					continue
				}
				want := "-1"
				if port.NUMANode != nil {
					want = strconv.Itoa(*port.NUMANode)
				}
				if got, ok := nets[port.IBDev]; !ok || got != want {
					t.Errorf("port %s/%d: net below cpu %q (found %v), want %s", port.IBDev, port.Port, got, ok, want)
				}
				if port.DataDirectBusID != "" {
					if _, ok := nets[port.IBDev+nccltopo.DataDirectSuffix]; !ok {
						t.Errorf("port %s/%d: no Data Direct net", port.IBDev, port.Port)
					}
				}
			}
			for _, g := range n.GPUs {
				if got, ok := pcis[g.Address]; !ok || got != strconv.Itoa(g.NUMANode) {
					t.Errorf("gpu %s: below cpu %q (found %v), want %d", g.Address, got, ok, g.NUMANode)
				}
			}
			if t.Failed() {
				t.Logf("file:\n%s", res.XML)
			}
		})
	}
}
