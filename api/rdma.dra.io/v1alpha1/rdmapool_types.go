// +groupName=rdma.dra.io

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The marker above is for controller-gen, which writes the RdmaPool CRD and the deep
// copies (zz_generated.deepcopy.go) from these types, and for k8s.io/code-generator, which
// writes the typed clientset, listers and informers of pkg/client (make generate).

// RdmaPoolKind is the kind of RdmaPool.
const RdmaPoolKind = "RdmaPool"

// RdmaPoolResource is the plural resource name of RdmaPool in the API.
const RdmaPoolResource = "rdmapools"

// Limits of a pool's spec. They keep the generated CEL expression well below the API's
// limit of 10 KiB and its cost below the allocator's budget; the controller still checks
// both on the expression it writes.
const (
	// MaxSelectorValues bounds each selector list.
	MaxSelectorValues = 32
	// MaxSelectorValueLength bounds one selector value: attribute strings are at most
	// 64 bytes, so a longer value could never match.
	MaxSelectorValueLength = 64
	// MaxCELLength bounds spec.cel.
	MaxCELLength = 4096
)

// PoolMode is how a pool hands out ports: whole (exclusive), in shares (shared), or all
// of a node's selected ports at once, as k8s-rdma-shared-dev-plugin did (legacy).
// +kubebuilder:validation:Enum=shared;exclusive;legacy
type PoolMode string

// The pool modes; they are the values of the rdma.dra.io/mode device attribute.
const (
	// PoolModeShared: one allocation is one or more shares (rdma.dra.io/shares) of one
	// port.
	PoolModeShared PoolMode = "shared"
	// PoolModeExclusive: one allocation is one whole port.
	PoolModeExclusive PoolMode = "exclusive"
	// PoolModeLegacy: one allocation is one share of the node's device
	// LegacyDeviceName(pool), which stands for every port that the node configuration's
	// legacyResources entry named after the pool selects on that node: a pod that asks
	// for one unit of the pool's extended resource gets all of those ports, as one unit
	// of a k8s-rdma-shared-dev-plugin resource gave it every HCA of its config entry.
	// The entry's maxPods (the plugin's rdmaHcaMax) is the device's rdma.dra.io/shares,
	// so at most that many claims hold it at once. The pool has no selectors of its own.
	PoolModeLegacy PoolMode = "legacy"
)

// PoolModes lists the pool modes in the order of the CRD's enum.
var PoolModes = []PoolMode{PoolModeShared, PoolModeExclusive, PoolModeLegacy}

// LegacyDevicePrefix starts the name of the device a node publishes for a legacy pool.
const LegacyDevicePrefix = "legacy-"

// MaxLegacyPoolNameLength bounds the name of a legacy pool: the device LegacyDeviceName
// makes of it must be a DNS label, at most 63 characters.
const MaxLegacyPoolNameLength = 63 - len(LegacyDevicePrefix)

// LegacyDeviceName is the name of the device that a node publishes for the legacy pool
// called pool (and for the node configuration's legacyResources entry of that name).
func LegacyDeviceName(pool string) string { return LegacyDevicePrefix + pool }

// LinkType names a link layer. Both the kernel's spelling (InfiniBand, Ethernet) and the
// short and lower-case forms the device plugins' configs use are accepted.
// +kubebuilder:validation:Enum=InfiniBand;Ethernet;infiniband;ethernet;IB;ETH;ib;eth;ether
type LinkType string

// RdmaPool is a set of RDMA ports that the controller offers as one DeviceClass, named
// after the pool, handed out whole or in shares.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=rpool,categories=rdma
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Ports",type=integer,JSONPath=`.status.ports`
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocated`,description="ports (exclusive) or shares (shared, legacy) in use"
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.free`,description="ports (exclusive) or shares (shared, legacy) that can still be allocated"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Extended Resource",type=string,JSONPath=`.spec.extendedResourceName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 253 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="metadata.name must be a DNS subdomain: it names the pool's DeviceClass"
// +kubebuilder:validation:XValidation:rule="!(has(self.spec) && has(self.spec.mode) && self.spec.mode == 'legacy') || (self.metadata.name.size() <= 56 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="metadata.name must be a DNS label of at most 56 characters in legacy mode: each node publishes the pool's device as legacy-<name>, which must be a DNS label"
type RdmaPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the pool selects and how it hands it out.
	// +required
	Spec RdmaPoolSpec `json:"spec"`
	// Status is what the controller observed.
	// +optional
	Status RdmaPoolStatus `json:"status,omitempty"`
}

// RdmaPoolSpec selects ports and says how they are handed out.
// +kubebuilder:validation:XValidation:rule="self.mode != 'legacy' || !has(self.selectors) || ((!has(self.selectors.vendors) || self.selectors.vendors.size() == 0) && (!has(self.selectors.deviceIDs) || self.selectors.deviceIDs.size() == 0) && (!has(self.selectors.drivers) || self.selectors.drivers.size() == 0) && (!has(self.selectors.ifNames) || self.selectors.ifNames.size() == 0) && (!has(self.selectors.ibdevs) || self.selectors.ibdevs.size() == 0) && (!has(self.selectors.linkTypes) || self.selectors.linkTypes.size() == 0) && (!has(self.selectors.pciAddresses) || self.selectors.pciAddresses.size() == 0) && (!has(self.selectors.minSpeedGbps) || self.selectors.minSpeedGbps == 0))",message="must be empty in legacy mode: the node configuration's legacyResources entry named after the pool selects its ports",fieldPath=".selectors"
type RdmaPoolSpec struct {
	// Mode is shared (claims get shares of a port, rdma.dra.io/shares), exclusive
	// (claims get whole ports) or legacy (a claim gets one share of the node's device
	// legacy-<pool name>, and with it every port that the node configuration's
	// legacyResources entry named after the pool selects on the node; that entry's
	// maxPods claims may hold it at once). It cannot change: claims allocated from the
	// pool's DeviceClass were allocated in that mode.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="mode is immutable; create another pool"
	Mode PoolMode `json:"mode"`
	// Selectors choose the ports. Within one selector any value may match (OR); all
	// selectors that are set must match (AND). No selectors: every port. A legacy pool
	// has none: its node configuration's legacyResources entry selects the ports.
	// +optional
	Selectors PoolSelectors `json:"selectors,omitempty"`
	// CEL is an extra DRA CEL selector expression over `device`, ANDed with the
	// selectors, e.g. `device.attributes["rdma.dra.io"].numa_node == 0`. It must be one
	// complete boolean expression on its own: it is parsed and type-checked alone before
	// it is combined, and the webhook refuses it otherwise (a CRD rule cannot parse CEL).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CEL string `json:"cel,omitempty"`
	// ExtendedResourceName lets pods that ask for this extended resource in
	// resources.limits (e.g. rdma/hca_shared_devices_a, the name the device plugins
	// used) be served from the pool. At most one pool may claim a name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$')",message="must be <domain>/<name>, e.g. rdma/hca_shared_devices_a"
	// +kubebuilder:validation:XValidation:rule="!(self.startsWith('kubernetes.io/') || self.matches('^[^/]*\\\\.kubernetes\\\\.io/'))",message="must not be in the kubernetes.io domain"
	ExtendedResourceName *string `json:"extendedResourceName,omitempty"`
	// Config is an RdmaConfig (apiVersion rdma.dra.io/v1alpha1, kind RdmaConfig) that
	// the DeviceClass passes to the driver for every claim of the pool; a claim's own
	// config overrides it field by field.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Config *runtime.RawExtension `json:"config,omitempty"`
}

// PoolSelectors select ports by what discovery reports about them; the names are those
// of the device plugins' selectors. Names and addresses accept shell patterns (*, ?,
// [a-z]).
// +kubebuilder:validation:XValidation:rule="!has(self.vendors) || self.vendors.all(v, v.matches('^(0[xX])?[0-9a-fA-F]{4}$'))",message="vendors must be PCI vendor IDs of four hex digits, e.g. 15b3"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceIDs) || self.deviceIDs.all(v, v.matches('^(0[xX])?[0-9a-fA-F]{4}$'))",message="deviceIDs must be PCI device IDs of four hex digits, e.g. 1021"
type PoolSelectors struct {
	// Vendors are PCI vendor IDs: "15b3".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	Vendors []string `json:"vendors,omitempty"`
	// DeviceIDs are PCI device IDs: "1021".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	DeviceIDs []string `json:"deviceIDs,omitempty"`
	// Drivers are kernel drivers of the PCI function: "mlx5_core".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:MinLength=1
	Drivers []string `json:"drivers,omitempty"`
	// IfNames are netdev names or patterns: "ibp*", "bond0".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:MinLength=1
	IfNames []string `json:"ifNames,omitempty"`
	// IBDevs are RDMA device names or patterns: "mlx5_*".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:MinLength=1
	IBDevs []string `json:"ibdevs,omitempty"`
	// LinkTypes are link layers: InfiniBand (IB) or Ethernet (ETH, ether; RoCE).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=9
	LinkTypes []LinkType `json:"linkTypes,omitempty"`
	// PCIAddresses are PCI addresses or patterns of the ports' functions:
	// "0000:03:00.0", "0000:1a:*".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:MinLength=1
	PCIAddresses []string `json:"pciAddresses,omitempty"`
	// MinSpeedGbps selects ports at least this fast; ports whose speed is unknown do not
	// match. 0 or unset: any speed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinSpeedGbps *int32 `json:"minSpeedGbps,omitempty"`
}

// RdmaPoolStatus is the pool's DeviceClass and usage as the controller last saw them.
// Counts are over the ports the pool selects in the published ResourceSlices.
type RdmaPoolStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DeviceClassName is the DeviceClass the controller keeps for the pool.
	// +optional
	DeviceClassName string `json:"deviceClassName,omitempty"`
	// Nodes is how many nodes have at least one port of the pool (a legacy pool: its
	// device).
	// +optional
	Nodes int32 `json:"nodes"`
	// Ports is how many ports the pool selects (a legacy pool: the ports its devices
	// stand for, added up).
	// +optional
	Ports int32 `json:"ports"`
	// Shares is the total number of shares of the pool's ports (shared pools), or of its
	// devices (legacy pools: each node's maxPods).
	// +optional
	Shares int64 `json:"shares,omitempty"`
	// AllocatedPorts is how many of the pool's ports are allocated to a claim, wholly
	// or in part (a legacy pool: the ports of its devices held by at least one claim).
	// +optional
	AllocatedPorts int32 `json:"allocatedPorts"`
	// AllocatedShares is how many shares of the pool's ports (shared pools) or devices
	// (legacy pools) are allocated.
	// +optional
	AllocatedShares int64 `json:"allocatedShares,omitempty"`
	// Allocated is what is in use in the pool's unit: shares in a shared or legacy pool,
	// ports in an exclusive pool.
	// +optional
	Allocated int64 `json:"allocated"`
	// Free is what can still be allocated in the pool's unit. A port whose other mode is
	// in use (its exclusive device, or a share of it) counts as not free.
	// +optional
	Free int64 `json:"free"`
	// Conditions: Ready says whether the DeviceClass matches the spec, with reasons such
	// as InvalidSelector, InvalidConfig, DeviceClassConflict, ExtendedResourceNameConflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RdmaPoolList is a list of RdmaPools.
// +kubebuilder:object:root=true
type RdmaPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the pools.
	Items []RdmaPool `json:"items"`
}

// The Ready condition and its reasons.
const (
	// ConditionReady is true when the pool's DeviceClass matches its spec.
	ConditionReady = "Ready"

	// ReasonDeviceClassReady: the DeviceClass is written and matches the spec.
	ReasonDeviceClassReady = "DeviceClassReady"
	// ReasonInvalidSelector: a selector or the CEL expression is invalid; the message
	// has the compiler's words. The DeviceClass keeps its last valid spec.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonInvalidConfig: spec.config is not a valid RdmaConfig.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonDeviceClassConflict: a DeviceClass of the pool's name exists and belongs to
	// someone else; the controller leaves it alone.
	ReasonDeviceClassConflict = "DeviceClassConflict"
	// ReasonExtendedResourceNameConflict: another pool or DeviceClass serves the same
	// extended resource name; the older one keeps it and this pool's DeviceClass is
	// written without it.
	ReasonExtendedResourceNameConflict = "ExtendedResourceNameConflict"
	// ReasonDeviceClassError: writing the DeviceClass failed; the controller retries.
	ReasonDeviceClassError = "DeviceClassError"
)
