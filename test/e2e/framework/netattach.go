package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/mocknet"
)

// Network attachment (docs/network-attachment.md) as the suite checks it: inside the pod
// with `ip` (busybox's, in the toolbox image), on the host with the Go net package (the
// suite runs as root in the host's namespaces), and in the mock sysfs GID tables that the
// plugin's emulated RDMA kernel writes.

// Exec runs a command in the pod's first container and returns its output (stdout and
// stderr). Not reaching the kubelet is retried for a minute (execWithRetry).
func (e *Env) Exec(ctx context.Context, ns, pod string, cmd ...string) (string, error) {
	return e.execWithRetry(ctx, time.Minute, ns, pod, cmd...)
}

// PodInterface is one interface of a pod as `ip` inside the pod shows it.
type PodInterface struct {
	Name         string
	HardwareAddr string
	MTU          int
	// Up is the administrative state (UP among the flags).
	Up bool
	// Addresses are the global addresses with prefix length, in `ip`'s order.
	Addresses []netip.Prefix
}

// PodInterface reads the interface ifname of the pod with `ip -o link` and `ip -o addr`.
func (e *Env) PodInterface(ctx context.Context, ns, pod, ifname string) (PodInterface, error) {
	link, err := e.Exec(ctx, ns, pod, "ip", "-o", "link", "show", "dev", ifname)
	if err != nil {
		return PodInterface{}, err
	}
	addr, err := e.Exec(ctx, ns, pod, "ip", "-o", "addr", "show", "dev", ifname)
	if err != nil {
		return PodInterface{}, err
	}
	return ParseIP(ifname, link, addr)
}

var (
	ipFlags = regexp.MustCompile(`<([^>]*)>`)
	ipMTU   = regexp.MustCompile(`\bmtu (\d+)`)
	ipMAC   = regexp.MustCompile(`link/\S+ ([0-9a-fA-F:]+)`)
	ipAddr  = regexp.MustCompile(`\binet6? (\S+)`)
)

// ParseIP parses the one-line outputs of `ip -o link show dev X` and `ip -o addr show dev
// X` (iproute2's or busybox's).
func ParseIP(name, link, addr string) (PodInterface, error) {
	pi := PodInterface{Name: name}
	m := ipMTU.FindStringSubmatch(link)
	if m == nil {
		return pi, fmt.Errorf("no MTU in %q", link)
	}
	pi.MTU, _ = strconv.Atoi(m[1])
	if m := ipMAC.FindStringSubmatch(link); m != nil {
		pi.HardwareAddr = strings.ToLower(m[1])
	}
	if m := ipFlags.FindStringSubmatch(link); m != nil {
		pi.Up = slices.Contains(strings.Split(m[1], ","), "UP")
	}
	for _, m := range ipAddr.FindAllStringSubmatch(addr, -1) {
		p, err := netip.ParsePrefix(m[1])
		if err != nil || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		pi.Addresses = append(pi.Addresses, p)
	}
	return pi, nil
}

// HostLink is an interface of the host as the tests compare them before and after.
type HostLink struct {
	Name, HardwareAddr string
	MTU                int
	Up                 bool
	// Addresses are the global addresses with prefix length, sorted.
	Addresses []string
}

// HostLinks returns the host's interfaces, sorted by name, without the pod network's
// veths (their names are random and come and go with the cluster's own pods) and without
// link-local addresses (the kernel makes those wherever a link is).
func HostLinks() ([]HostLink, error) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("host interfaces: %w", err)
	}
	var out []HostLink
	for _, ifc := range ifcs {
		if strings.HasPrefix(ifc.Name, "veth") {
			continue
		}
		hl := HostLink{Name: ifc.Name, HardwareAddr: ifc.HardwareAddr.String(), MTU: ifc.MTU, Up: ifc.Flags&net.FlagUp != 0}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
				ones, _ := n.Mask.Size()
				hl.Addresses = append(hl.Addresses, fmt.Sprintf("%s/%d", n.IP, ones))
			}
		}
		slices.Sort(hl.Addresses)
		out = append(out, hl)
	}
	slices.SortFunc(out, func(a, b HostLink) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// FindHostLink returns the host interface of that name, and false when there is none.
func FindHostLink(links []HostLink, name string) (HostLink, bool) {
	for _, l := range links {
		if l.Name == name {
			return l, true
		}
	}
	return HostLink{}, false
}

// GIDEntry is a used entry of a port's GID table in the mock sysfs.
type GIDEntry struct {
	Index int
	GID   netip.Addr
	Type  string
	Ndev  string
}

// GIDTable reads the used entries of a port's GID table in the mock sysfs, in index
// order: the entries that have a type (sysfs.md: unused ones have none).
func (e *Env) GIDTable(ibdev string, port int) ([]GIDEntry, error) {
	dir := filepath.Join(e.Vars["LOCALCLUSTER_MOCK_SYS"], "class", "infiniband", ibdev, "ports", strconv.Itoa(port))
	names, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return nil, fmt.Errorf("GID table of %s port %d: %w", ibdev, port, err)
	}
	var out []GIDEntry
	for _, n := range names {
		i, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		typ, err := os.ReadFile(filepath.Join(dir, "gid_attrs", "types", n.Name()))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, "gids", n.Name()))
		if err != nil {
			return nil, err
		}
		gid, err := sysfs.ParseGID(strings.TrimSpace(string(raw)))
		if err != nil {
			return nil, fmt.Errorf("GID %d of %s: %w", i, ibdev, err)
		}
		ndev, _ := os.ReadFile(filepath.Join(dir, "gid_attrs", "ndevs", n.Name()))
		out = append(out, GIDEntry{Index: i, GID: gid.Addr(), Type: strings.TrimSpace(string(typ)), Ndev: strings.TrimSpace(string(ndev))})
	}
	slices.SortFunc(out, func(a, b GIDEntry) int { return a.Index - b.Index })
	return out, nil
}

// RoCEv2Index returns the index of the RoCE v2 entry of addr on netdev ndev, or -1.
func RoCEv2Index(table []GIDEntry, ndev string, addr netip.Addr) int {
	want := netip.AddrFrom16(addr.As16())
	for _, g := range table {
		if g.Type == string(sysfs.GIDTypeRoCEv2) && g.Ndev == ndev && g.GID == want {
			return g.Index
		}
	}
	return -1
}

// AddressPools returns the node configuration's address pools from the chart values
// the cluster tool wrote (its one source: mocknet.AddressPools).
func (e *Env) AddressPools() ([]nodeconfig.AddressPool, error) {
	data, err := os.ReadFile(e.ValuesFile())
	if err != nil {
		return nil, err
	}
	var v struct {
		NodeConfig nodeconfig.Config `json:"nodeConfig"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("parse %s: %w", e.ValuesFile(), err)
	}
	if len(v.NodeConfig.Network.AddressPools) == 0 {
		return nil, fmt.Errorf("%s has no nodeConfig.network.addressPools: is the cluster tool older than network attachment? make cluster-install", e.ValuesFile())
	}
	return v.NodeConfig.Network.AddressPools, nil
}

// Pool returns the address pool of that name.
func Pool(pools []nodeconfig.AddressPool, name string) (nodeconfig.AddressPool, error) {
	for _, p := range pools {
		if p.Name == name {
			return p, nil
		}
	}
	return nodeconfig.AddressPool{}, fmt.Errorf("no address pool %q", name)
}

// InPool says why addr is not an address the pool may hand out, or nil.
func InPool(pool nodeconfig.AddressPool, addr netip.Prefix) error {
	subnet, err := netip.ParsePrefix(pool.Subnet)
	if err != nil {
		return err
	}
	start, err1 := netip.ParseAddr(pool.RangeStart)
	end, err2 := netip.ParseAddr(pool.RangeEnd)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	a := addr.Addr()
	switch {
	case addr.Bits() != subnet.Bits() || !subnet.Contains(a):
		return fmt.Errorf("%s is not an address of subnet %s", addr, subnet)
	case a.Compare(start) < 0 || a.Compare(end) > 0:
		return fmt.Errorf("%s is outside the range %s-%s of pool %s", a, start, end, pool.Name)
	case slices.Contains(pool.Exclude, a.String()):
		return fmt.Errorf("%s is excluded from pool %s", a, pool.Name)
	}
	return nil
}

// MockNetdevs returns the cluster tool's record of the host interfaces that stand in
// for the mock node's netdevs.
func (e *Env) MockNetdevs() (*mocknet.Plan, error) {
	path := e.Vars["LOCALCLUSTER_MOCK_NETDEVS"]
	if path == "" {
		return nil, errors.New("the cluster's env file has no LOCALCLUSTER_MOCK_NETDEVS: the cluster predates mock netdevs; make cluster-down cluster-up")
	}
	rec, err := mocknet.ReadRecord(path)
	if err != nil {
		return nil, err
	}
	if len(rec.Links) == 0 {
		return nil, fmt.Errorf("%s records no mock netdevs", path)
	}
	return rec, nil
}

// MockNetdev returns the recorded stand-in of that name.
func MockNetdev(rec *mocknet.Plan, name string) (mocknet.Link, error) {
	for _, l := range rec.Links {
		if l.Name == name {
			return l, nil
		}
	}
	return mocknet.Link{}, fmt.Errorf("no mock netdev %s", name)
}

// Attachment is one journal of a device's attachment into a pod, from the claim's
// checkpoint entry (its network record).
type Attachment struct {
	Device, Pod, Phase string
}

// Attachments reads the attachment journals of a claim from the plugin's checkpoint on
// the host; none when the claim has no entry or no network record.
func (e *Env) Attachments(claimUID string) ([]Attachment, error) {
	data, err := os.ReadFile(filepath.Join(e.PluginDataDir(), "checkpoint.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cp struct {
		Claims map[string]struct {
			Network *struct {
				Devices []struct {
					Device      string `json:"device"`
					Attachments []struct {
						Pod   string `json:"pod"`
						State struct {
							Phase string `json:"phase"`
						} `json:"state"`
					} `json:"attachments"`
				} `json:"devices"`
			} `json:"network"`
		} `json:"claims"`
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		// A checkpoint caught between the plugin's write and rename is never read (the
		// plugin replaces the file), so this is a format change: say so.
		return nil, fmt.Errorf("parse checkpoint: %w", err)
	}
	entry, ok := cp.Claims[claimUID]
	if !ok || entry.Network == nil {
		return nil, nil
	}
	var out []Attachment
	for _, d := range entry.Network.Devices {
		for _, a := range d.Attachments {
			out = append(out, Attachment{Device: d.Device, Pod: a.Pod, Phase: a.State.Phase})
		}
	}
	return out, nil
}

// NetworkData returns the networkData of the driver's devices in the claim's status, by
// device name; devices without it are left out.
func NetworkData(c *resourceapi.ResourceClaim) map[string]resourceapi.NetworkDeviceData {
	out := map[string]resourceapi.NetworkDeviceData{}
	for _, d := range c.Status.Devices {
		if d.Driver == DriverName && d.NetworkData != nil {
			out[d.Device] = *d.NetworkData
		}
	}
	return out
}

// DeviceMetadata reads the driver's device metadata file of request in the pod's claim
// podClaim (a claim from a template, the pod-local name) inside the pod
// (docs/device-metadata.md), decoded as a consumer would: the first object it understands.
func (e *Env) DeviceMetadata(ctx context.Context, ns, pod, podClaim, request string) (*metadata.DeviceMetadata, error) {
	return e.DeviceMetadataAt(ctx, ns, pod, metadata.ResourceClaimTemplateFilePath(DriverName, podClaim, request))
}

// DeviceMetadataAt reads and decodes the device metadata file at path inside the pod.
func (e *Env) DeviceMetadataAt(ctx context.Context, ns, pod, path string) (*metadata.DeviceMetadata, error) {
	out, err := e.Exec(ctx, ns, pod, "cat", path)
	if err != nil {
		return nil, fmt.Errorf("read %s in the pod: %w", path, err)
	}
	var dm metadata.DeviceMetadata
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(strings.NewReader(out)), &dm); err != nil {
		return nil, fmt.Errorf("decode %s: %w\n%s", path, err, out)
	}
	return &dm, nil
}
