package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

// Device metadata (KEP-5304, docs/device-metadata.md). With --device-metadata the
// kubelet plugin helper writes, per request of a prepared claim, a metadata file that the
// runtime bind-mounts read-only into the claim's containers under
// /var/run/kubernetes.io/dra-device-attributes/. The driver fills it with what an
// application would otherwise discover with scripts: every attribute the device is
// published with, the container path of its uverbs device and, for a device whose
// network is attached into the pod, the pod's view (interface, addresses, the GID index
// of the pod's own address) as networkData and attributes. Prepare answers carry the
// metadata (so that a repeated prepare, after a kubelet restart, writes the same), and
// the NRI side rewrites the file once an attachment is made.

// Metadata attributes the driver adds to the published ones (the driver's domain, like
// them). For a device whose network goes into the pod, netdev and gid_index keep their
// published names but describe the pod's view, the interface in the pod and the index of
// its address's GID, or are left out until the attachment is made (and when several
// pods share the claim); host_netdev is then the port's netdev on the host.
const (
	metaUVerbs   = "uverbs"
	metaNetdev   = "netdev"
	metaGIDIndex = "gid_index"
	// metaHostNetdev is the port's netdev on the host, for an attached device whose
	// netdev attribute names the pod's interface.
	metaHostNetdev = "host_netdev"
)

// deviceMetadataOptions are the helper's options for device metadata, with the CDI specs
// that mount the files written to cdiDir. Only the latest API version is written: the
// helper refuses to start without it, and the consumers of an API that is new in 1.37
// read it. The files are written without the helper's fsyncs ([metadataFileOps]).
func deviceMetadataOptions(cdiDir string) []kubeletplugin.Option {
	return []kubeletplugin.Option{
		kubeletplugin.EnableDeviceMetadata(true, []schema.GroupVersion{metadatav1beta1.SchemeGroupVersion}),
		kubeletplugin.CDIDirectory(cdiDir),
		kubeletplugin.MetadataFileOps(metadataFileOps()),
	}
}

// metadataFileOps is how the helper writes metadata files and their CDI specs: atomically
// but without an fsync of the file and its directory, which the helper's default does on
// every prepare. A file whose CDI spec is on a tmpfs is of no use after a reboot, and the
// kubelet prepares the claim again then (docs/kubelet-plugin.md, "Why nothing is
// fsynced"). The other operations keep the helper's defaults.
func metadataFileOps() kubeletplugin.MetadataFileOperations {
	return kubeletplugin.MetadataFileOperations{WriteFile: func(name string, data []byte, perm os.FileMode) error {
		return atomicfile.WriteFile(name, data, perm)
	}}
}

// MetadataWriter rewrites the metadata file of a prepared claim's request;
// *kubeletplugin.Helper implements it when device metadata is enabled.
type MetadataWriter interface {
	UpdateRequestMetadata(ctx context.Context, namespace, name string, uid types.UID, request string, devices []kubeletplugin.Device) error
}

// metadataSink holds the MetadataWriter, which exists only once the helper has started
// (after the driver): nil until then and when device metadata is off.
type metadataSink struct {
	w atomic.Pointer[MetadataWriter]
}

// SetMetadataWriter enables the metadata updates of attachments; w nil disables them.
func (d *Driver) SetMetadataWriter(w MetadataWriter) {
	if w == nil {
		d.metadata.w.Store(nil)
		return
	}
	d.metadata.w.Store(&w)
}

// answerFor is the kubelet's answer for a completed entry, with each device's metadata
// (which the helper writes only when device metadata is enabled).
func (d *Driver) answerFor(entry *checkpoint.Claim) kubeletplugin.PrepareResult {
	out := kubeletplugin.PrepareResult{Devices: make([]kubeletplugin.Device, 0, len(entry.Devices))}
	var net *checkpoint.Network
	if d.metadataFiles != nil {
		net = networkOf(entry)
	}
	for _, dev := range entry.Devices {
		kd := kubeletplugin.Device{
			Requests:     []string{dev.Request},
			PoolName:     dev.Pool,
			DeviceName:   dev.Device,
			CDIDeviceIDs: dev.CDIDeviceIDs,
		}
		if d.metadataFiles != nil {
			// Only with device metadata on: the helper ignores it otherwise, and this is
			// the prepare path.
			kd.Metadata = d.deviceMetadata(dev, net)
		}
		if dev.ShareID != "" {
			id := types.UID(dev.ShareID)
			kd.ShareID = &id
		}
		out.Devices = append(out.Devices, kd)
	}
	return out
}

// deviceMetadata is what the container learns about one prepared device: the
// attributes it was published with, its uverbs device, and the pod's view of an attached
// network. net is the claim's network record, nil when it has none.
func (d *Driver) deviceMetadata(dev checkpoint.Device, net *checkpoint.Network) *kubeletplugin.DeviceMetadata {
	md, ok := d.devices.Lookup(dev.Pool, dev.Device)
	// Room for the published attributes and the two added here: a map grown entry by
	// entry was most of a prepare's allocations in this package.
	attrs := make(map[string]resourceapi.DeviceAttribute, len(md.Attributes)+2)
	if ok {
		for name, v := range md.Attributes {
			attrs[string(name)] = v
		}
		if md.Port.Verbs != nil && md.Port.Verbs.Name != "" {
			attrs[metaUVerbs] = resourceapi.DeviceAttribute{StringValue: ptr.To(path.Join("/dev/infiniband", md.Port.Verbs.Name))}
		}
	}
	meta := &kubeletplugin.DeviceMetadata{Attributes: attrs}
	nd := networkDeviceOf(net, dev)
	if nd == nil {
		return meta
	}
	// The host's netdev and GID index are of no use in the pod: the pod has its own
	// interface (or, with only the RDMA device moved, none of the port's).
	if host, ok := attrs[metaNetdev]; ok {
		attrs[metaHostNetdev] = host
	}
	delete(attrs, metaNetdev)
	delete(attrs, metaGIDIndex)
	a := podView(nd)
	if a == nil {
		return meta
	}
	attrs[metaNetdev] = resourceapi.DeviceAttribute{StringValue: ptr.To(a.Spec.PodIfName)}
	if a.GIDIndex != nil {
		attrs[metaGIDIndex] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(*a.GIDIndex))}
	}
	meta.NetworkData = networkData(a)
	return meta
}

// networkDeviceOf returns the network record of dev; nil when the device has none (or n
// is nil).
func networkDeviceOf(n *checkpoint.Network, dev checkpoint.Device) *checkpoint.NetworkDevice {
	if n == nil {
		return nil
	}
	for i := range n.Devices {
		nd := &n.Devices[i]
		if nd.Request == dev.Request && nd.Pool == dev.Pool && nd.Device == dev.Device && nd.ShareID == dev.ShareID && !nd.Stale {
			return nd
		}
	}
	return nil
}

// podView returns the attachment that the claim's metadata describes: the device's only
// completed attachment. The metadata file is one per claim, so when several pods share
// the claim, each with its own interface, it cannot speak for all of them and carries
// the published facts only.
func podView(nd *checkpoint.NetworkDevice) *netattach.State {
	var found *netattach.State
	for i := range nd.Attachments {
		st := &nd.Attachments[i].State
		if st.Phase != netattach.PhaseAttached || st.Spec.PodIfName == "" {
			continue
		}
		if found != nil {
			return nil
		}
		found = st
	}
	return found
}

// networkData is the API's form of an attachment, for the claim status and the metadata.
func networkData(st *netattach.State) *resourceapi.NetworkDeviceData {
	data := &resourceapi.NetworkDeviceData{InterfaceName: st.Spec.PodIfName, HardwareAddress: st.HardwareAddr}
	for _, p := range st.PodAddresses {
		data.IPs = append(data.IPs, p.String())
	}
	return data
}

// updateMetadata rewrites the metadata of the requests of claim uid that have an
// attached device, after an attachment changed. A failure is logged: the metadata is
// informational and the attachment itself stands.
func (d *Driver) updateMetadata(ctx context.Context, uid string) {
	wp := d.metadata.w.Load()
	if wp == nil {
		return
	}
	var entry *checkpoint.Claim
	err := d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		if e := cp.Claims[uid]; e != nil && e.Phase == checkpoint.PhasePrepareCompleted {
			entry = e.Clone()
		}
		return false, nil
	})
	if err != nil || entry == nil {
		return
	}
	net := networkOf(entry)
	if net == nil {
		return
	}
	answer := d.answerFor(entry)
	var requests []string
	for _, nd := range net.Devices {
		if !nd.Stale {
			requests = append(requests, nd.Request)
		}
	}
	slices.Sort(requests)
	for _, req := range slices.Compact(requests) {
		var devs []kubeletplugin.Device
		for _, kd := range answer.Devices {
			if slices.Contains(kd.Requests, req) {
				devs = append(devs, kd)
			}
		}
		if err := (*wp).UpdateRequestMetadata(ctx, entry.Namespace, entry.Name, types.UID(uid), req, devs); err != nil {
			klog.FromContext(ctx).Error(err, "Update the device metadata of the claim", "claim", klog.KRef(entry.Namespace, entry.Name), "request", req)
		}
	}
}

// MetadataFiles locates the files the helper writes for device metadata, to remove those
// of claims the kubelet never unprepares (cleanup.go) and everything at uninstall. The
// helper documents both names: {CDIDir}/{driver}_metadata_{claimUID}_{request}.json and
// {DataDir}/dra-device-metadata/{namespace}_{name}/. RunDir, when set, is where
// {DataDir}/dra-device-metadata links to (metadataplace.go).
type MetadataFiles struct {
	DriverName, CDIDir, DataDir, RunDir string
}

// metadataSubDir is the helper's directory for metadata files in the plugin data directory.
const metadataSubDir = "dra-device-metadata"

// metadataFileName is the helper's name of a request's metadata file, in a directory of
// the request's name in the claim's directory.
const metadataFileName = "metadata.json"

// removeClaim removes the metadata files of claim uid; namespace and name may be empty
// when unknown (a CDI spec without a checkpoint entry), and then only its CDI specs go.
// The CDI specs are named by the claim's UID; the directory is named by its namespace
// and name, which a newer claim of the same name shares (deleted and created again,
// maybe being prepared right now), so only the files that record uid go from it
// (removeClaimDir).
func (m *MetadataFiles) removeClaim(uid, namespace, name string) error {
	if m == nil {
		return nil
	}
	if err := cdi.ValidateClaimUID(uid); err != nil {
		return err
	}
	var errs []error
	if err := m.removeSpecs(m.DriverName + "_metadata_" + uid + "_*.json"); err != nil {
		errs = append(errs, err)
	}
	if namespace != "" && name != "" {
		dir := filepath.Join(m.DataDir, metadataSubDir, namespace+"_"+name)
		if filepath.Dir(dir) != filepath.Join(m.DataDir, metadataSubDir) {
			errs = append(errs, fmt.Errorf("claim %s/%s: not a valid name for a metadata directory", namespace, name))
		} else if err := removeClaimDir(dir, uid); err != nil {
			errs = append(errs, fmt.Errorf("remove device metadata %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// removeAll removes the CDI specs of every claim's metadata and the metadata files in
// RunDir (the data directory, with the link to RunDir or the files themselves, goes as
// a whole at uninstall). RunDir itself stays: the chart mounts it.
func (m *MetadataFiles) removeAll() error {
	if m == nil {
		return nil
	}
	err := m.removeSpecs(m.DriverName + "_metadata_*.json")
	if m.RunDir != "" {
		if cerr := clearDir(m.RunDir); cerr != nil {
			err = errors.Join(err, fmt.Errorf("remove device metadata files: %w", cerr))
		}
	}
	return err
}

func (m *MetadataFiles) removeSpecs(pattern string) error {
	matches, err := filepath.Glob(filepath.Join(m.CDIDir, pattern))
	if err != nil {
		return fmt.Errorf("list device metadata CDI specs: %w", err)
	}
	var errs []error
	for _, p := range matches {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove device metadata CDI spec: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeClaimDir removes from dir, the metadata directory of a claim's namespace and
// name, the request files that record claim uid, and each request directory and dir
// itself once they are empty. Files of another claim and anything unexpected stay.
func removeClaimDir(dir, uid string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		reqDir := filepath.Join(dir, e.Name())
		if err := removeOwnFile(filepath.Join(reqDir, metadataFileName), uid); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := removeIfEmpty(reqDir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeIfEmpty(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeOwnFile removes the metadata file at path if it records claim uid. The file is
// renamed aside first and checked there, so that the file checked is the file removed:
// a newer claim's file written meanwhile lands at path and is not touched, and a newer
// claim's file that was renamed aside goes back (settleAside).
func removeOwnFile(path, uid string) error {
	aside := filepath.Join(filepath.Dir(path), atomicfile.TempPrefix(metadataFileName)+"cleanup")
	// What a cleanup interrupted between the two steps left aside, first.
	if err := settleAside(aside, path, uid); err != nil {
		return err
	}
	if err := os.Rename(path, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("move %s aside: %w", path, err)
	}
	return settleAside(aside, path, uid)
}

// settleAside removes the file renamed aside when it records claim uid, and otherwise
// puts it back at path, unless a newer file is there by now (a hard link does not
// replace, unlike a rename). A file whose claim cannot be read is kept, with the error.
func settleAside(aside, path, uid string) error {
	owner, err := recordedClaimUID(aside)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil && owner == uid {
		if err := os.Remove(aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	if lerr := os.Link(aside, path); lerr != nil && !errors.Is(lerr, fs.ErrExist) {
		return errors.Join(err, fmt.Errorf("put back %s: %w", path, lerr))
	}
	if rerr := os.Remove(aside); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return errors.Join(err, fmt.Errorf("put back %s: %w", path, rerr))
	}
	if err != nil {
		return fmt.Errorf("keep %s: %w", path, err)
	}
	return nil
}

// removeIfEmpty removes the directory dir unless something is in it (a newer claim's
// files, or a file being written).
func removeIfEmpty(dir string) error {
	err := os.Remove(dir)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return nil
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// recordedClaimUID returns the UID of the claim whose metadata the file at path holds:
// the first object of the stream (one per API version, all of the same claim).
func recordedClaimUID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	var obj struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(f).Decode(&obj); err != nil {
		return "", fmt.Errorf("decode %s: %w", path, err)
	}
	if obj.Metadata.UID == "" {
		return "", fmt.Errorf("decode %s: no claim UID", path)
	}
	return obj.Metadata.UID, nil
}
