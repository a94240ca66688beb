// Package checkpoint keeps the kubelet plugin's record of prepared claims in one versioned
// JSON file in the plugin's data directory.
//
// The record is what makes prepare and unprepare safe across restarts: the kubelet may ask
// to unprepare a claim in a process that never prepared it, and a crash may stop a prepare
// half way. Each claim therefore goes through two phases: PrepareStarted is written before
// anything else is touched on the node (and names what is about to be written), and
// PrepareCompleted is written with the answer given to the kubelet. A retry finds a Started
// entry and knows which leftovers to remove before it starts over.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Version is the format version this build reads and writes. A file with a higher version
// was written by a newer plugin and is never overwritten by this one.
//
// Adding an optional field that older builds may drop on rewrite does not change the
// version; anything that an older build must not drop does.
const Version = 1

// FileName is the checkpoint's name inside the plugin data directory.
const FileName = "checkpoint.json"

// Phase is how far the preparation of one claim got.
type Phase string

// Phases of a claim entry.
const (
	// PhasePrepareStarted: the entry's devices are about to be (or were partly) written.
	// The CDI spec of the claim may or may not exist.
	PhasePrepareStarted Phase = "PrepareStarted"
	// PhasePrepareCompleted: the CDI spec exists and the kubelet got the entry's answer.
	PhasePrepareCompleted Phase = "PrepareCompleted"
)

// Checkpoint is the whole file.
type Checkpoint struct {
	// Version is the format version, see [Version].
	Version int `json:"version"`
	// BootID is the kernel's boot ID when the file was written; entries of an earlier
	// boot are void because their CDI specs lived in a tmpfs and their pods are gone.
	BootID string `json:"bootID"`
	// Claims holds one entry per claim UID.
	Claims map[string]*Claim `json:"claims"`
}

// Claim is the state of one ResourceClaim on this node.
type Claim struct {
	// UID, Namespace and Name identify the ResourceClaim.
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Phase says how far preparation got.
	Phase Phase `json:"phase"`
	// Adopted is true for an entry rebuilt from a CDI spec on disk and the claim in the API
	// after the checkpoint was lost; its CDI device IDs are not known, so a prepare retry
	// rewrites the spec as for a Started entry.
	Adopted bool `json:"adopted,omitempty"`
	// Devices are the claim's devices of this driver, in allocation order.
	Devices []Device `json:"devices"`
	// UpdatedAt is when the entry last changed.
	UpdatedAt time.Time `json:"updatedAt"`
	// Network is the claim's network attachment state (the pods, the devices to attach and
	// the journaled attachments); nil when the claim attaches nothing. Set it with
	// [Claim.SetNetwork], which stamps the record's version.
	Network *Network `json:"network,omitempty"`
}

// Device is one allocated device of a claim as the plugin prepared it.
type Device struct {
	// Request is the request (or request/subrequest) the device was allocated for.
	Request string `json:"request"`
	// Pool and Device name the published device.
	Pool   string `json:"pool"`
	Device string `json:"device"`
	// ShareID is the allocation's share ID for consumable-capacity allocations.
	ShareID string `json:"shareID,omitempty"`
	// PortKey identifies the physical port behind the device, whatever the device model;
	// two claims conflict through it.
	PortKey string `json:"portKey"`
	// Exclusive is true when the device stands for the whole port.
	Exclusive bool `json:"exclusive"`
	// AdminAccess is true for an admin-access allocation, which monitors a device without
	// using it up and therefore conflicts with nobody.
	AdminAccess bool `json:"adminAccess,omitempty"`
	// Shares is how many shares of a shared device the allocation consumed (its
	// consumed capacity rdma.dra.io/shares); 0 in entries of earlier versions and for
	// exclusive devices, and then counted as 1 for a shared device.
	Shares int64 `json:"shares,omitempty"`
	// MaxShares is the shared capacity the device was published with when it was
	// prepared (devicemodel.Device.MaxShares); 0 for an exclusive device.
	MaxShares int `json:"maxShares,omitempty"`
	// IBDev and Port are the RDMA device and port, for humans and for status.
	IBDev string `json:"ibdev"`
	Port  int    `json:"port"`
	// Ports are all the ports of a device that stands for several (a legacy device),
	// IBDev/Port first; empty for the device of one port. Each port conflicts like a
	// shared device of it.
	Ports []PortRef `json:"ports,omitempty"`
	// CDIDeviceIDs are the CDI devices returned to the kubelet; set once Completed.
	CDIDeviceIDs []string `json:"cdiDeviceIDs,omitempty"`
}

// PortRef is one port a prepared device holds.
type PortRef struct {
	IBDev string `json:"ibdev"`
	Port  int    `json:"port"`
	// PortKey is the port's key (the name of its exclusive device).
	PortKey string `json:"portKey"`
}

// ErrFutureVersion is returned for a file written by a newer plugin.
var ErrFutureVersion = errors.New("checkpoint was written by a newer plugin version")

// ErrCorrupt is returned for a file that cannot be parsed or is inconsistent.
var ErrCorrupt = errors.New("checkpoint is corrupted")

// New returns an empty checkpoint of the current version for bootID.
func New(bootID string) *Checkpoint {
	return &Checkpoint{Version: Version, BootID: bootID, Claims: map[string]*Claim{}}
}

// Decode parses data and checks the invariants that the rest of the plugin relies on.
func Decode(data []byte) (*Checkpoint, error) {
	// The version is read first so that a newer file is reported as such even if its
	// shape no longer parses as this version.
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if head.Version > Version {
		return nil, fmt.Errorf("%w: file version %d, this plugin reads up to %d", ErrFutureVersion, head.Version, Version)
	}
	if head.Version < 1 {
		return nil, fmt.Errorf("%w: version %d", ErrCorrupt, head.Version)
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]*Claim{}
	}
	for uid, c := range cp.Claims {
		// Keys become file names (CDI specs, claim locks) and API lookups: one that is
		// not a Kubernetes UID cannot be acted on, neither now nor by the recovery of a
		// later boot, so the file is treated as corrupted (moved aside by Store.Load)
		// instead of failing every start of the plugin.
		if !uuidRE.MatchString(uid) {
			return nil, fmt.Errorf("%w: entry key %q is not a UUID", ErrCorrupt, uid)
		}
		if c == nil || c.UID != uid {
			return nil, fmt.Errorf("%w: entry %q does not carry its own UID", ErrCorrupt, uid)
		}
		if c.Phase != PhasePrepareStarted && c.Phase != PhasePrepareCompleted {
			return nil, fmt.Errorf("%w: entry %q has unknown phase %q", ErrCorrupt, uid, c.Phase)
		}
		if err := checkNetwork(uid, c.Network); err != nil {
			return nil, err
		}
	}
	return &cp, nil
}

// uuidRE matches the UUIDs Kubernetes uses as object UIDs (what cdi.ValidateClaimUID
// accepts; this package does not import cdi).
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Encode returns the file content of cp: compact JSON, one line, as every release wrote
// it; `jq .` reads it.
func Encode(cp *Checkpoint) ([]byte, error) {
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return append(data, '\n'), nil
}

// Clone returns a deep copy of c, so that callers can change an entry without touching
// the copy that was last saved.
func (c *Claim) Clone() *Claim {
	if c == nil {
		return nil
	}
	out := *c
	out.Devices = make([]Device, len(c.Devices))
	for i, d := range c.Devices {
		d.CDIDeviceIDs = append([]string(nil), d.CDIDeviceIDs...)
		d.Ports = append([]PortRef(nil), d.Ports...)
		out.Devices[i] = d
	}
	out.Network = c.Network.DeepCopy()
	return &out
}
