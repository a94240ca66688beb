package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FabricConfig holds the fabric settings of a claim's traffic: quality of service,
// partition, adaptive routing, queue pairs and, on RoCE, which GID entry to use. The
// driver passes them to NCCL and UCX as environment variables (docs/claim-config.md has
// the table of variables and where each applies).
//
// Like RdmaConfig, every field is optional: nil means not set here, so that NCCL's and
// UCX's own defaults apply, and a claim's value overrides its class's field by field.
// Only TopologyFile is a claim's to set freely; every other field a claim sets must be
// granted by the class's AllowedFabric.
type FabricConfig struct {
	// TrafficClass is the traffic class of the claim's queue pairs, 0 to 255: on RoCE
	// v2 the IP header's DSCP and ECN bits (DSCP 26 with ECN is 106), on InfiniBand the
	// GRH's traffic class. Becomes NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS.
	TrafficClass *int32 `json:"trafficClass,omitempty"`
	// ServiceLevel is the InfiniBand service level of the claim's queue pairs, 0 to 15
	// (on RoCE, the Ethernet priority). Becomes NCCL_IB_SL and UCX_IB_SL.
	ServiceLevel *int32 `json:"serviceLevel,omitempty"`
	// AdaptiveRouting asks NCCL to use (true) or not use (false) its transfers that
	// tolerate out-of-order arrival, and UCX to pick a service level with (or without)
	// adaptive routing. Becomes NCCL_IB_ADAPTIVE_ROUTING (1/0) and UCX_IB_AR_ENABLE (y/n).
	AdaptiveRouting *bool `json:"adaptiveRouting,omitempty"`
	// QPsPerConnection is the number of queue pairs NCCL opens per connection between two
	// ranks, 1 to MaxQPsPerConnection. Becomes NCCL_IB_QPS_PER_CONNECTION.
	QPsPerConnection *int32 `json:"qpsPerConnection,omitempty"`
	// PKey is the InfiniBand partition key of the claim's queue pairs, 0x0001 to 0xffff
	// (0x8000 set: full membership). NCCL takes the key's index in the port's P_Key
	// table (NCCL_IB_PKEY), which the driver looks up at prepare; UCX takes the
	// partition (UCX_IB_PKEY).
	PKey *string `json:"pkey,omitempty"`
	// RoCEVersion is the RoCE version of the GID entry NCCL uses, 1 or 2. Becomes
	// NCCL_IB_ROCE_VERSION_NUM; with gidIndex auto the driver's GID index follows it.
	RoCEVersion *int32 `json:"roceVersion,omitempty"`
	// AddressFamily is the address family of the GID entry NCCL uses on RoCE, ipv4 or
	// ipv6. Becomes NCCL_IB_ADDR_FAMILY; with gidIndex auto the driver's GID index
	// follows it.
	AddressFamily *AddressFamily `json:"addressFamily,omitempty"`
	// TopologyFile asks for an NCCL topology file of the claim's devices (NCCL_TOPO_FILE).
	// It describes only the claim's own devices, so any claim may ask for it. Default
	// false.
	TopologyFile *bool `json:"topologyFile,omitempty"`
}

// AddressFamily is the address family of a RoCE GID entry.
type AddressFamily string

// The address families.
const (
	// AddressFamilyIPv4 is an entry of an IPv4 address (IPv4-mapped GID).
	AddressFamilyIPv4 AddressFamily = "ipv4"
	// AddressFamilyIPv6 is an entry of a global (not link-local) IPv6 address.
	AddressFamilyIPv6 AddressFamily = "ipv6"
)

// addressFamilies lists the families in the order a user reads them in errors.
var addressFamilies = []AddressFamily{AddressFamilyIPv4, AddressFamilyIPv6}

// Bounds of the fabric fields.
const (
	// MaxTrafficClass bounds TrafficClass: the GRH's and IP header's 8-bit field.
	MaxTrafficClass = 255
	// MaxServiceLevel bounds ServiceLevel: InfiniBand's 4-bit field.
	MaxServiceLevel = 15
	// MaxQPsPerConnection bounds QPsPerConnection. NCCL keeps at most 128 queue pairs
	// per connection (NCCL_IB_MAX_QPS) in fixed arrays, for each of up to 8 devices
	// merged into one virtual NIC (NCCL_NET_MAX_DEVS_PER_NIC), and does not check the
	// product: 16 × 8 stays within 128.
	MaxQPsPerConnection = 16
)

// DefaultRoCEVersion and DefaultAddressFamily are NCCL's own defaults, which the GID
// index follows when a config sets only one of RoCEVersion and AddressFamily.
const (
	DefaultRoCEVersion   = 2
	DefaultAddressFamily = AddressFamilyIPv4
)

// FollowsGID reports whether the config asks for a GID entry of a RoCE version or
// address family, which the auto GID index must then follow.
func (f *FabricConfig) FollowsGID() bool {
	return f != nil && (f.RoCEVersion != nil || f.AddressFamily != nil)
}

// GIDWant returns the RoCE version and address family of the GID entry the config asks
// for, NCCL's defaults filling what it leaves out.
func (f *FabricConfig) GIDWant() (int, AddressFamily) {
	version, family := DefaultRoCEVersion, DefaultAddressFamily
	if f != nil && f.RoCEVersion != nil {
		version = int(*f.RoCEVersion)
	}
	if f != nil && f.AddressFamily != nil {
		family = *f.AddressFamily
	}
	return version, family
}

// validate checks the set fields, in the order of the type.
func (f *FabricConfig) validate(fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateRange(fldPath.Child("trafficClass"), f.TrafficClass, 0, MaxTrafficClass)...)
	errs = append(errs, validateRange(fldPath.Child("serviceLevel"), f.ServiceLevel, 0, MaxServiceLevel)...)
	errs = append(errs, validateRange(fldPath.Child("qpsPerConnection"), f.QPsPerConnection, 1, MaxQPsPerConnection)...)
	if f.PKey != nil {
		if _, err := ParsePKey(*f.PKey); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("pkey"), truncate(*f.PKey), err.Error()))
		}
	}
	if f.RoCEVersion != nil && !isRoCEVersion(*f.RoCEVersion) {
		errs = append(errs, field.Invalid(fldPath.Child("roceVersion"), *f.RoCEVersion, "must be 1 or 2"))
	}
	if f.AddressFamily != nil {
		errs = append(errs, validateAddressFamily(fldPath.Child("addressFamily"), *f.AddressFamily)...)
	}
	return errs
}

// validateRange checks an optional integer against [lo, hi].
func validateRange(fldPath *field.Path, v *int32, lo, hi int32) field.ErrorList {
	if v == nil || (*v >= lo && *v <= hi) {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, *v, fmt.Sprintf("must be from %d to %d", lo, hi))}
}

func isRoCEVersion(v int32) bool { return v == 1 || v == 2 }

// validateAddressFamily checks one address family, bounded before it is quoted.
func validateAddressFamily(fldPath *field.Path, a AddressFamily) field.ErrorList {
	switch {
	case len(a) > MaxScalarLength:
		return field.ErrorList{field.TooLong(fldPath, "", MaxScalarLength)}
	case !isOneOf(a, addressFamilies):
		return field.ErrorList{field.NotSupported(fldPath, string(a), addressFamilies)}
	}
	return nil
}

// overlayFabric sets every field that is set in c on out, as copies.
func overlayFabric(c, out *FabricConfig) {
	copyPtr(&out.TrafficClass, c.TrafficClass)
	copyPtr(&out.ServiceLevel, c.ServiceLevel)
	copyPtr(&out.AdaptiveRouting, c.AdaptiveRouting)
	copyPtr(&out.QPsPerConnection, c.QPsPerConnection)
	copyPtr(&out.PKey, c.PKey)
	copyPtr(&out.RoCEVersion, c.RoCEVersion)
	copyPtr(&out.AddressFamily, c.AddressFamily)
	copyPtr(&out.TopologyFile, c.TopologyFile)
}
