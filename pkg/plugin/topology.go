package plugin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nccltopo"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// pciBusIDAttribute is the standard attribute under which GPU drivers (and this one)
// publish a device's PCI address.
const pciBusIDAttribute resourceapi.QualifiedName = "resource.kubernetes.io/pciBusID"

// pciBusIDRE matches a PCI address as sysfs names it: domain:bus:device.function.
var pciBusIDRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)

// TopologyBuilder builds the NCCL topology file of a claim; *TopologySource is the real
// one.
type TopologyBuilder interface {
	Build(ctx context.Context, claim *resourceapi.ResourceClaim, driverName string, devices []cdi.ClaimDevice) ([]byte, error)
}

// TopologySource builds the NCCL topology file of a claim (docs/nccl-topology.md): its
// RDMA ports and the PCI devices of other drivers allocated in the same claim, which is
// how the GPUs prepared with the ports are known.
type TopologySource struct {
	// SysfsRoot is the node's sysfs, read afresh for every file.
	SysfsRoot string
	// Kube lists the node's ResourceSlices, to find the other drivers' devices.
	Kube kubernetes.Interface
	// NodeName is this node.
	NodeName string
}

// writeTopology builds and writes the NCCL topology file of a claim that asks for one.
func (d *Driver) writeTopology(ctx context.Context, plan *claimPlan) error {
	if d.topology == nil {
		return errors.New("the claim asks for an NCCL topology file (fabric.topologyFile), and this plugin cannot build one")
	}
	xml, err := d.topology.Build(ctx, plan.claim, d.driverName, plan.devices)
	if err != nil {
		return err
	}
	return d.specs.WriteTopology(ctx, plan.entry.UID, xml)
}

// Build returns the topology file of the claim. Devices of other drivers that publish no
// PCI address (nothing NCCL could place) are left out and logged.
func (s *TopologySource) Build(ctx context.Context, claim *resourceapi.ResourceClaim, driverName string, devices []cdi.ClaimDevice) ([]byte, error) {
	logger := klog.FromContext(ctx)
	var ports []discovery.Port
	for i := range devices {
		ports = append(ports, devices[i].AllPorts()...)
	}
	busIDs, err := s.peerBusIDs(ctx, claim, driverName)
	if err != nil {
		return nil, err
	}
	fsys, err := sysfs.Open(s.SysfsRoot)
	if err != nil {
		return nil, err
	}
	gpus := busIDs[:0]
	for _, id := range busIDs {
		// Another driver's device may be no GPU (a NIC of another driver, an FPGA):
		// NCCL's file places GPUs and nets only.
		class, err := fsys.ReadString("bus/pci/devices/" + id + "/class")
		if err != nil || !strings.HasPrefix(class, "0x03") {
			logger.V(2).Info("A device of the claim is no GPU; the NCCL topology file leaves it out", "claim", klog.KObj(claim), "pciBusID", id, "class", class, "err", err)
			continue
		}
		gpus = append(gpus, id)
	}
	res, err := nccltopo.Build(fsys, nccltopo.Input{Ports: ports, GPUBusIDs: gpus})
	if err != nil {
		return nil, fmt.Errorf("NCCL topology file: %w", err)
	}
	for _, sk := range res.Skipped {
		logger.V(2).Info("Port left out of the NCCL topology file", "claim", klog.KObj(claim), "ibdev", sk.IBDev, "port", sk.Port, "reason", sk.Reason)
	}
	return res.XML, nil
}

// peerBusIDs returns the PCI bus IDs of the claim's devices of other drivers on this
// node, in allocation order, from the node's ResourceSlices: one list call, made only
// for claims that ask for the file.
func (s *TopologySource) peerBusIDs(ctx context.Context, claim *resourceapi.ResourceClaim, driverName string) ([]string, error) {
	var others []resourceapi.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driverName {
			others = append(others, r)
		}
	}
	if len(others) == 0 {
		return nil, nil
	}
	if s.Kube == nil {
		return nil, errors.New("NCCL topology file: no API client to look up the claim's other devices")
	}
	list, err := s.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, s.NodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("NCCL topology file: list the ResourceSlices of node %s: %w", s.NodeName, err)
	}
	type key struct{ driver, pool, device string }
	published := map[key]*resourceapi.Device{}
	for i := range list.Items {
		sl := &list.Items[i]
		for j := range sl.Spec.Devices {
			published[key{sl.Spec.Driver, sl.Spec.Pool.Name, sl.Spec.Devices[j].Name}] = &sl.Spec.Devices[j]
		}
	}
	logger := klog.FromContext(ctx)
	var ids []string
	for _, r := range others {
		dev := published[key{r.Driver, r.Pool, r.Device}]
		if dev == nil {
			logger.Info("A device of the claim is not published on this node; the NCCL topology file leaves it out", "claim", klog.KObj(claim), "driver", r.Driver, "pool", r.Pool, "device", r.Device)
			continue
		}
		attr, ok := dev.Attributes[pciBusIDAttribute]
		if !ok || attr.StringValue == nil {
			logger.V(2).Info("A device of the claim publishes no PCI address; the NCCL topology file leaves it out", "claim", klog.KObj(claim), "driver", r.Driver, "device", r.Device)
			continue
		}
		if !pciBusIDRE.MatchString(*attr.StringValue) {
			// Another driver's text goes into a sysfs path: only an address is taken.
			logger.Info("A device of the claim publishes a malformed PCI address; the NCCL topology file leaves it out", "claim", klog.KObj(claim), "driver", r.Driver, "device", r.Device, "pciBusID", *attr.StringValue)
			continue
		}
		if !slices.Contains(ids, *attr.StringValue) {
			ids = append(ids, *attr.StringValue)
		}
	}
	return ids, nil
}
