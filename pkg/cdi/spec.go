// Package cdi builds and writes the per-claim CDI specs through which the container
// runtime gives a container its RDMA character devices, environment and hooks.
//
// Each prepared claim gets one transient spec of kind Kind with one CDI device per
// allocated device, named <claimUID>-<device>[-<shareID>] so that a name is never reused
// by another claim or share. What belongs to the claim as a whole (/dev/infiniband/rdma_cm,
// the NCCL/UCX environment, the memlock hook) sits in the spec's own containerEdits: the
// runtime applies those once to every container that gets any device of the spec.
//
// A claim-wide CDI device listed with every device would not do: the kubelet passes a
// container the IDs of all its devices without removing duplicates, and the CDI library
// applies a device's edits once per mention, so the hook would run once per device.
package cdi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/porttable"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// DefaultDriverName is the DRA driver name that Options.DriverName defaults to (the same
// as devicemodel.DefaultDriverName, which this package does not import).
const DefaultDriverName = "rdma.dra.io"

// Class is the CDI class of the driver's specs; the vendor comes from the driver name.
const Class = "hca"

// Vendor is the CDI vendor of the specs of the driver driverName: "k8s." + driverName.
// Keying it by the driver name keeps two installations of the driver on one node apart:
// their specs have different kinds and file names, a claim with devices of both gets one
// spec of each, and neither installation lists or removes the other's files. The default
// driver's vendor, k8s.rdma.dra.io, is the one earlier versions used, so their specs and
// CDI device IDs stay valid across an upgrade.
func Vendor(driverName string) string {
	if driverName == "" {
		driverName = DefaultDriverName
	}
	return "k8s." + driverName
}

// Kind is the CDI kind of the specs of the driver driverName.
func Kind(driverName string) string { return Vendor(driverName) + "/" + Class }

// containerDevDir is where the nodes appear inside the container, whatever DevRoot is.
const containerDevDir = "/dev/infiniband"

// hookTimeoutSeconds bounds the memlock hook: a hung hook would otherwise hold up the
// container's creation forever. The hook does one prlimit call.
const hookTimeoutSeconds = 10

// ClaimDevice is one allocated device of a claim, in request order.
type ClaimDevice struct {
	// Request is the request name from the allocation result.
	Request string
	// Device is the published device name, e.g. mlx5-0-p1 or mlx5-0-p1-shared.
	Device string
	// ShareID is the consumable-capacity share ID, "" if none.
	ShareID string
	// Port is the port the device stands for.
	Port discovery.Port
	// Ports are all the ports of a device that stands for several (a legacy device,
	// devicemodel.ModeLegacy), Port first; empty for the device of one port.
	Ports []discovery.Port
	// Config is the effective (merged, defaulted) config of the device's request.
	Config v1alpha1.RdmaConfig
	// Attached says that the plugin's NRI side attaches the device's network (or the
	// RDMA device itself) into the pod: the spec then holds containers back until the
	// attachment is made (Options.AttachedDir).
	Attached bool
}

// AllPorts returns the ports the device stands for: Ports, or Port alone.
func (d *ClaimDevice) AllPorts() []discovery.Port {
	if len(d.Ports) > 0 {
		return d.Ports
	}
	return []discovery.Port{d.Port}
}

// Options configure BuildSpec and the Writer. The zero value works on a real node.
type Options struct {
	// DriverName is the DRA driver name; it makes the CDI vendor (see Vendor). Default
	// DefaultDriverName.
	DriverName string
	// SpecDir is the directory of transient CDI specs; default /var/run/cdi.
	SpecDir string
	// DevRoot is the host's /dev as the container runtime sees it (it goes into the
	// spec's hostPath fields); default /dev.
	DevRoot string
	// HookPath is the host path of rdma-dra-cdi-hook. Needed only by claims that ask for
	// a memlock limit or have an attached device.
	HookPath string
	// AttachedDir is the host directory of the attachment marks (pkg/attachmark). When
	// set, a claim with an attached device runs the hook at createRuntime, which fails a
	// container's start until its pod's attachments of the claim are marked complete.
	AttachedDir string
	// TopologyDir is the host directory (seen by the plugin at the same path) of the
	// claims' NCCL topology files (Writer.WriteTopology). A claim whose config asks for
	// fabric.topologyFile gets its file mounted and NCCL_TOPO_FILE set; without the
	// directory such a claim is refused.
	TopologyDir string
	// Exists reports whether a host path (below DevRoot) exists; optional nodes
	// (rdma_cm, umad, issm) that do not are left out. Default: os.Stat succeeds. A
	// plugin that sees the host's /dev elsewhere maps the path here.
	Exists func(path string) bool
	// PortTables reads the live P_Key and GID tables of ports, for the fabric settings
	// that need them (fabric.pkey; fabric.roceVersion and addressFamily with gidIndex
	// auto). Default: a porttable.Reader of sysfs.DefaultRoot.
	PortTables PortTables
}

func (o Options) withDefaults() Options {
	if o.DriverName == "" {
		o.DriverName = DefaultDriverName
	}
	if o.SpecDir == "" {
		o.SpecDir = "/var/run/cdi"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
	if o.PortTables == nil {
		o.PortTables = porttable.New(sysfs.DefaultRoot)
	}
	if o.Exists == nil {
		o.Exists = func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		}
	}
	return o
}

// uuidRE matches the UUIDs Kubernetes uses as object UIDs and share IDs. Claim UIDs go
// into file names, so nothing else is accepted.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidateClaimUID returns an error unless uid looks like a Kubernetes UID.
func ValidateClaimUID(uid string) error {
	if !uuidRE.MatchString(uid) {
		return fmt.Errorf("claim UID %q is not a UUID", uid)
	}
	return nil
}

// charDevRE is the shape of the node names discovery reports; they become paths.
var charDevRE = map[string]*regexp.Regexp{
	"uverbs": regexp.MustCompile(`^uverbs[0-9]+$`),
	"umad":   regexp.MustCompile(`^umad[0-9]+$`),
	"issm":   regexp.MustCompile(`^issm[0-9]+$`),
}

// QualifiedName returns the fully qualified CDI device ID of a device of the driver
// driverName.
func QualifiedName(driverName, name string) string {
	return parser.QualifiedName(Vendor(driverName), Class, name)
}

// DeviceName is the CDI device name of one allocated device of a claim.
func DeviceName(claimUID string, d *ClaimDevice) string {
	name := claimUID + "-" + d.Device
	if d.ShareID != "" {
		name += "-" + d.ShareID
	}
	return name
}

// BuildSpec builds the claim's CDI spec and returns it with the qualified CDI device IDs
// of each device, in the order of devices. It reads nothing but opts.Exists and, for the
// fabric settings that need them, opts.PortTables, and writes nothing. The spec's cdiVersion is the lowest that its content needs, so that older
// runtimes accept it.
func BuildSpec(ctx context.Context, claimUID string, devices []ClaimDevice, opts Options) (*cdispec.Spec, [][]string, error) {
	opts = opts.withDefaults()
	if err := ValidateClaimUID(claimUID); err != nil {
		return nil, nil, err
	}
	if err := parser.ValidateVendorName(Vendor(opts.DriverName)); err != nil {
		return nil, nil, fmt.Errorf("driver name %q: %w", opts.DriverName, err)
	}
	if len(devices) == 0 {
		return nil, nil, errors.New("claim has no devices")
	}
	configs := make([]*v1alpha1.RdmaConfig, len(devices))
	for i := range devices {
		// Callers pass defaulted configs; defaulting again keeps a zero Config usable.
		configs[i] = devices[i].Config.DeepCopy()
		configs[i].Default()
		if err := configs[i].Validate(nil).ToAggregate(); err != nil {
			return nil, nil, fmt.Errorf("config of request %q: %w", devices[i].Request, err)
		}
	}

	spec := &cdispec.Spec{Kind: Kind(opts.DriverName)}
	seen := map[string]bool{}
	for i := range devices {
		d := &devices[i]
		if err := checkDevice(d); err != nil {
			return nil, nil, fmt.Errorf("device %d (request %q): %w", i, d.Request, err)
		}
		name := DeviceName(claimUID, d)
		if seen[name] {
			return nil, nil, fmt.Errorf("device %q of request %q is listed twice", d.Device, d.Request)
		}
		seen[name] = true
		var nodes []*cdispec.DeviceNode
		for _, p := range d.AllPorts() {
			pn, err := portNodes(&p, *configs[i].CharDevices, opts)
			if err != nil {
				return nil, nil, fmt.Errorf("device %q of request %q: %w", d.Device, d.Request, err)
			}
			// The ports of one RDMA device share its nodes: each goes in once.
			for _, n := range pn {
				if !slices.ContainsFunc(nodes, func(have *cdispec.DeviceNode) bool { return have.Path == n.Path }) {
					nodes = append(nodes, n)
				}
			}
		}
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name:           name,
			ContainerEdits: cdispec.ContainerEdits{DeviceNodes: nodes},
		})
	}

	claimWide, err := claimWideEdits(ctx, claimUID, devices, configs, opts)
	if err != nil {
		return nil, nil, err
	}
	spec.ContainerEdits = claimWide
	ids := make([][]string, len(devices))
	for i := range devices {
		ids[i] = []string{QualifiedName(opts.DriverName, spec.Devices[i].Name)}
	}

	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("determine CDI version: %w", err)
	}
	spec.Version = version
	return spec, ids, nil
}

// checkDevice checks what of a device goes into names and paths.
func checkDevice(d *ClaimDevice) error {
	if errs := validation.IsDNS1123Label(d.Device); len(errs) > 0 {
		return fmt.Errorf("device name %q: %s", d.Device, errs[0])
	}
	if d.ShareID != "" && !uuidRE.MatchString(d.ShareID) {
		return fmt.Errorf("share ID %q is not a UUID", d.ShareID)
	}
	return nil
}

// portNodes returns the device nodes of one port: its uverbs node always, its umad and
// issm nodes when the set asks for them and the host has them.
func portNodes(p *discovery.Port, set v1alpha1.CharDeviceSet, opts Options) ([]*cdispec.DeviceNode, error) {
	if p.Verbs == nil {
		return nil, fmt.Errorf("port %s/%d has no uverbs device", p.IBDev, p.Port)
	}
	verbs, err := charNode("uverbs", p.Verbs, opts.DevRoot)
	if err != nil {
		return nil, err
	}
	nodes := []*cdispec.DeviceNode{verbs}
	for _, opt := range []struct {
		kind string
		dev  *discovery.CharDev
		want bool
	}{
		{"umad", p.UMAD, set.WantsUMAD()},
		{"issm", p.ISSM, set.WantsISSM()},
	} {
		// Adapters without MAD support (irdma, iWARP) have neither node; that is fine.
		if !opt.want || opt.dev == nil {
			continue
		}
		n, err := charNode(opt.kind, opt.dev, opts.DevRoot)
		if err != nil {
			return nil, err
		}
		if opts.Exists(n.HostPath) {
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// charNode is the spec entry of one character device. Type, major and minor are given,
// so the runtime needs no host node to create it in the container.
func charNode(kind string, dev *discovery.CharDev, devRoot string) (*cdispec.DeviceNode, error) {
	if !charDevRE[kind].MatchString(dev.Name) {
		return nil, fmt.Errorf("%s device name %q is not %sN", kind, dev.Name, kind)
	}
	return &cdispec.DeviceNode{
		Path:     path.Join(containerDevDir, dev.Name),
		HostPath: filepath.Join(devRoot, "infiniband", dev.Name),
		Type:     "c",
		Major:    int64(dev.Major),
		Minor:    int64(dev.Minor),
	}, nil
}

// claimWideEdits are the spec-wide edits: rdma_cm, the environment, the memlock hook and
// the hook that waits for attachments.
func claimWideEdits(ctx context.Context, claimUID string, devices []ClaimDevice, configs []*v1alpha1.RdmaConfig, opts Options) (cdispec.ContainerEdits, error) {
	var edits cdispec.ContainerEdits
	// The kernel's rdma_cm node has no sysfs class entry with a dev file, so the
	// runtime stats the host node; it must therefore exist, or injection would fail.
	cm := filepath.Join(opts.DevRoot, "infiniband", "rdma_cm")
	if opts.Exists(cm) {
		edits.DeviceNodes = append(edits.DeviceNodes, &cdispec.DeviceNode{
			Path:     path.Join(containerDevDir, "rdma_cm"),
			HostPath: cm,
			Type:     "c",
		})
	}
	env, err := envFor(ctx, devices, configs, opts.PortTables)
	if err != nil {
		return edits, err
	}
	edits.Env = env

	if wantsTopologyFile(configs) {
		if opts.TopologyDir == "" {
			return edits, errors.New("the claim asks for an NCCL topology file (fabric.topologyFile), and this plugin has no directory for them")
		}
		// One path per claim, so that two claims of a pod never mount over each other;
		// NCCL takes one file per process, the last claim's in CDI's order.
		edits.Mounts = append(edits.Mounts, &cdispec.Mount{
			HostPath:      TopologyFile(opts.TopologyDir, claimUID),
			ContainerPath: TopologyContainerPath(claimUID),
			Type:          "bind",
			Options:       []string{"ro", "bind", "nosuid", "nodev", "noexec"},
		})
		edits.Env = append(edits.Env, EnvNCCLTopoFile+"="+TopologyContainerPath(claimUID))
	}
	if limit, ok := memlockLimit(configs); ok {
		h, err := hook(opts, "createContainer", "claim asks for a memlock limit", "memlock", "--limit", limit)
		if err != nil {
			return edits, err
		}
		edits.Hooks = append(edits.Hooks, h)
	}
	if opts.AttachedDir != "" && slices.ContainsFunc(devices, func(d ClaimDevice) bool { return d.Attached }) {
		// createRuntime runs in the runtime's namespaces, where the marks directory is.
		h, err := hook(opts, "createRuntime", "claim has a network attachment", "attached", "--dir", opts.AttachedDir, "--claim", claimUID)
		if err != nil {
			return edits, err
		}
		edits.Hooks = append(edits.Hooks, h)
	}
	return edits, nil
}

// hook runs rdma-dra-cdi-hook with args at stage, bounded by hookTimeoutSeconds; why
// says what needs it, for the error when no hook path is configured.
func hook(opts Options, stage, why string, args ...string) (*cdispec.Hook, error) {
	if opts.HookPath == "" {
		return nil, fmt.Errorf("%s, but no hook path is configured", why)
	}
	timeout := hookTimeoutSeconds
	return &cdispec.Hook{HookName: stage, Path: opts.HookPath, Args: append([]string{"rdma-dra-cdi-hook"}, args...), Timeout: &timeout}, nil
}

// memlockLimit is the highest limit any request asks for, as the hook's --limit value:
// "unlimited" beats every number. It returns false when no request asks.
func memlockLimit(configs []*v1alpha1.RdmaConfig) (string, bool) {
	var maxBytes int64
	asked := false
	for _, c := range configs {
		switch p := *c.Memlock; p {
		case v1alpha1.MemlockUnlimited:
			return "unlimited", true
		case v1alpha1.MemlockUnset:
		default:
			// Validated by BuildSpec, so Bytes succeeds.
			n, _ := p.Bytes()
			asked = true
			maxBytes = max(maxBytes, n)
		}
	}
	if !asked {
		return "", false
	}
	return fmt.Sprint(maxBytes), true
}

// logger is split out so that the pure builder logs through the caller's context.
func logger(ctx context.Context) klog.Logger {
	return klog.FromContext(ctx).WithName("cdi")
}
