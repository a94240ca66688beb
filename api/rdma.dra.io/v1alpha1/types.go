// Package v1alpha1 holds the rdma.dra.io/v1alpha1 API: RdmaConfig, the opaque device
// configuration that a DeviceClass or a ResourceClaim passes to the driver.
package v1alpha1

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the driver's configuration and of its CRDs.
const GroupName = "rdma.dra.io"

// Version is the API version of this package.
const Version = "v1alpha1"

// RdmaConfigKind is the kind of RdmaConfig.
const RdmaConfigKind = "RdmaConfig"

// SchemeGroupVersion is GroupName/Version; its String() is the apiVersion users write.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// RdmaConfig is the opaque configuration of RDMA devices in a DeviceClass or a
// ResourceClaim (spec.devices.config[].opaque.parameters with driver rdma.dra.io).
//
// Every field is optional; nil means "not set here", so that a claim's config can
// override a class's config field by field (see Merge). Default fills what is still nil.
type RdmaConfig struct {
	metav1.TypeMeta `json:",inline"`

	// CharDevices selects which character devices below /dev/infiniband a container gets
	// besides rdma_cm: verbs, diagnostics (default) or management.
	CharDevices *CharDeviceSet `json:"charDevices,omitempty"`
	// NCCLEnv injects NCCL_IB_HCA, UCX_NET_DEVICES, RDMA_DEVICES and, where it applies,
	// NCCL_IB_GID_INDEX. Default true.
	NCCLEnv *bool `json:"ncclEnv,omitempty"`
	// GIDIndex is the policy for NCCL_IB_GID_INDEX: auto (default), none or a number
	// from 0 to 255.
	GIDIndex *GIDIndexPolicy `json:"gidIndex,omitempty"`
	// Memlock is the RLIMIT_MEMLOCK to give containers: unset (default), unlimited or a
	// number of bytes, written as an integer or a quantity such as 64Gi.
	Memlock *MemlockPolicy `json:"memlock,omitempty"`
	// AllowedCharDevices is an admin limit: the widest set of character devices a claim
	// of the class may get (verbs, diagnostics or management). Only a DeviceClass config
	// (an RdmaPool's config among them) may set it. Default: no limit.
	AllowedCharDevices *CharDeviceSet `json:"allowedCharDevices,omitempty"`
	// MaxMemlock is an admin limit: the highest memlock a claim of the class may ask
	// for: unset (claims may not raise the limit), a number of bytes, or unlimited (no
	// limit, the default). Only a DeviceClass config may set it.
	MaxMemlock *MemlockPolicy `json:"maxMemlock,omitempty"`
	// Network attaches the port's network into the pod's network namespace (RoCE and
	// IPoIB in ordinary pods); see NetworkConfig. Default: nothing is attached.
	Network *NetworkConfig `json:"network,omitempty"`
}

// CharDeviceSet names a set of character devices below /dev/infiniband.
type CharDeviceSet string

// The character device sets. Each includes the ones before it.
const (
	// CharDevicesVerbs is uverbsN only: enough for verbs, NCCL, UCX and MPI.
	CharDevicesVerbs CharDeviceSet = "verbs"
	// CharDevicesDiagnostics adds umadN, which ibstat, perfquery and ibdiagnet need.
	CharDevicesDiagnostics CharDeviceSet = "diagnostics"
	// CharDevicesManagement adds issmN, which a subnet manager needs to set the port's
	// IsSM capability bit.
	CharDevicesManagement CharDeviceSet = "management"
)

// charDeviceSets lists the valid sets in the order a user reads them in errors.
var charDeviceSets = []CharDeviceSet{CharDevicesVerbs, CharDevicesDiagnostics, CharDevicesManagement}

// WantsUMAD reports whether the set includes the umad devices.
func (s CharDeviceSet) WantsUMAD() bool {
	return s == CharDevicesDiagnostics || s == CharDevicesManagement
}

// WantsISSM reports whether the set includes the issm devices.
func (s CharDeviceSet) WantsISSM() bool {
	return s == CharDevicesManagement
}

// GIDIndexPolicy is GIDIndexAuto, GIDIndexNone or a decimal index from 0 to 255.
//
// It is kept as the text the user wrote (a JSON number is kept as its digits), so that
// Validate can quote the offending value back; JSON accepts both a number and a string.
type GIDIndexPolicy string

// The named GID index policies.
const (
	// GIDIndexAuto uses the GID index discovery found, when all ports of the claim agree.
	GIDIndexAuto GIDIndexPolicy = "auto"
	// GIDIndexNone never sets NCCL_IB_GID_INDEX.
	GIDIndexNone GIDIndexPolicy = "none"
)

// Index returns the fixed GID index of the policy, and false for auto, none and invalid
// values.
func (p GIDIndexPolicy) Index() (int, bool) {
	n, ok := canonicalUint(string(p), 64)
	if !ok || n > 255 {
		return 0, false
	}
	return int(n), true
}

// MarshalJSON writes a fixed index as a JSON number and everything else as a string.
func (p GIDIndexPolicy) MarshalJSON() ([]byte, error) {
	return marshalNumberOrString(string(p))
}

// UnmarshalJSON accepts a JSON number or a JSON string.
func (p *GIDIndexPolicy) UnmarshalJSON(data []byte) error {
	s, err := unmarshalNumberOrString(data)
	if err != nil {
		return err
	}
	*p = GIDIndexPolicy(s)
	return nil
}

// MemlockPolicy is MemlockUnset, MemlockUnlimited or a positive number of bytes written
// as an integer or a Kubernetes quantity ("64Gi").
//
// Like GIDIndexPolicy it keeps the user's text; JSON accepts a number or a string.
type MemlockPolicy string

// The named memlock policies.
const (
	// MemlockUnset leaves the container's RLIMIT_MEMLOCK as the runtime set it.
	MemlockUnset MemlockPolicy = "unset"
	// MemlockUnlimited raises RLIMIT_MEMLOCK to infinity.
	MemlockUnlimited MemlockPolicy = "unlimited"
)

// Bytes returns the limit of a byte-valued policy, and false for unset, unlimited and
// invalid values.
func (p MemlockPolicy) Bytes() (int64, bool) {
	return parseMemlockBytes(string(p))
}

// MarshalJSON writes a plain integer as a JSON number and everything else as a string.
func (p MemlockPolicy) MarshalJSON() ([]byte, error) {
	return marshalNumberOrString(string(p))
}

// UnmarshalJSON accepts a JSON number or a JSON string.
func (p *MemlockPolicy) UnmarshalJSON(data []byte) error {
	s, err := unmarshalNumberOrString(data)
	if err != nil {
		return err
	}
	*p = MemlockPolicy(s)
	return nil
}

// canonicalUint parses s as an unsigned decimal integer written the way strconv writes
// it (no sign, no leading zeros), so that text and number round-trip unchanged.
func canonicalUint(s string, bits int) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil || strconv.FormatUint(n, 10) != s {
		return 0, false
	}
	return n, true
}
