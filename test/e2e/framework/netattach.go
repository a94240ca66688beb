package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
)

// Network attachment (docs/network-attachment.md) as the suite checks it: inside the pod
// with `ip` (busybox's, in the toolbox image), on the host through Host.Links, and in the
// mock sysfs GID tables that the plugin's emulated RDMA kernel writes.

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
	h, err := e.host()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.paths().SysRoot, "class", "infiniband", ibdev, "ports", strconv.Itoa(port))
	names, err := h.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return nil, fmt.Errorf("GID table of %s port %d: %w", ibdev, port, err)
	}
	var out []GIDEntry
	for _, n := range names {
		i, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		typ, err := h.ReadFile(filepath.Join(dir, "gid_attrs", "types", n.Name()))
		if err != nil {
			continue
		}
		raw, err := h.ReadFile(filepath.Join(dir, "gids", n.Name()))
		if err != nil {
			return nil, err
		}
		gid, err := sysfs.ParseGID(strings.TrimSpace(string(raw)))
		if err != nil {
			return nil, fmt.Errorf("GID %d of %s: %w", i, ibdev, err)
		}
		ndev, _ := h.ReadFile(filepath.Join(dir, "gid_attrs", "ndevs", n.Name()))
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

// AddressPools returns the node configuration's address pools from the cluster's chart
// values (on the local cluster the values the cluster tool wrote, whose one source is
// pkg/mocknode/mocknet.AddressPools): those of the last values file that has any, as helm
// would merge them (a later file's list replaces an earlier one's).
func (e *Env) AddressPools() ([]nodeconfig.AddressPool, error) {
	var pools []nodeconfig.AddressPool
	for _, file := range e.Values {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var v struct {
			NodeConfig nodeconfig.Config `json:"nodeConfig"`
		}
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		if p := v.NodeConfig.Network.AddressPools; len(p) > 0 {
			pools = p
		}
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("the cluster's values %v have no nodeConfig.network.addressPools: is the cluster tool older than network attachment? make cluster-install", e.Values)
	}
	return pools, nil
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

// FindMockNetdev returns the stand-in of that name.
func FindMockNetdev(netdevs []MockNetdev, name string) (MockNetdev, error) {
	for _, l := range netdevs {
		if l.Name == name {
			return l, nil
		}
	}
	return MockNetdev{}, fmt.Errorf("no mock netdev %s", name)
}

// Attachment is one journal of a device's attachment into a pod, from the claim's
// checkpoint entry (its network record).
type Attachment struct {
	Device, Pod, Phase string
}

// Attachments reads the attachment journals of a claim from the plugin's checkpoint on
// the host; none when the claim has no entry or no network record.
func (e *Env) Attachments(claimUID string) ([]Attachment, error) {
	data, err := e.checkpointFile()
	if err != nil || data == nil {
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
