// Package claimgen writes the ResourceClaimTemplate (or ResourceClaim) a pod needs for N
// GPUs and M RDMA NICs placed together, which by hand takes one request per device and
// one constraint per pair: `rdma-dra claim` is its command line.
//
// The shape of what it writes, whatever the options:
//
//   - one request per device, gpu-0..gpu-<N-1> and nic-0..nic-<M-1>, each `exactly` one
//     device of its class, so that the allocation result says which NIC went with which
//     GPU;
//   - with an alignment (pcie, numa), one matchAttribute constraint per group: NIC i and
//     the GPUs i*k..i*k+k-1, where k = N/M. A single constraint over two requests of
//     count N would put all devices below one root instead;
//   - with DistinctRails, one more constraint over all NIC requests: distinctAttribute
//     rdma.dra.io/rail;
//   - with GPUDirect, a CEL selector on each NIC request.
//
// Build refuses options that cannot give a claim the API server accepts and the
// allocator can satisfy (ValidateObject checks the API's limits on the result), and
// errors name the command's flags (the Flag constants), which the command defines from
// the same constants.
package claimgen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// The flags of `rdma-dra claim`, one per field of Options; errors name them.
const (
	FlagKind          = "kind"
	FlagName          = "name"
	FlagNamespace     = "namespace"
	FlagGPUs          = "gpus"
	FlagNICs          = "nics"
	FlagAlign         = "align"
	FlagGPUClass      = "gpu-class"
	FlagNICClass      = "nic-class"
	FlagDistinctRails = "distinct-rails"
	FlagGPUDirect     = "gpudirect"
)

// Kind is the kind of object Build writes.
type Kind string

// The kinds Build writes.
const (
	KindTemplate Kind = "ResourceClaimTemplate"
	KindClaim    Kind = "ResourceClaim"
)

// Kinds lists the kinds in the order help and errors name them.
var Kinds = []Kind{KindTemplate, KindClaim}

// Align is what each NIC shares with its GPUs.
type Align string

// The alignments.
const (
	// AlignPCIe: the NIC and its GPUs below one PCIe root complex, the placement
	// GPUDirect RDMA wants (resource.kubernetes.io/pcieRoot, which GPU drivers publish).
	AlignPCIe Align = "pcie"
	// AlignNUMA: the NIC and its GPUs on one NUMA node (resource.kubernetes.io/numaNode);
	// every device must publish it, see Warnings.
	AlignNUMA Align = "numa"
	// AlignNone: no constraint between GPUs and NICs.
	AlignNone Align = "none"
)

// Aligns lists the alignments in the order help and errors name them.
var Aligns = []Align{AlignPCIe, AlignNUMA, AlignNone}

// GPUDirect selects NICs by how GPU memory can be registered with them (the port
// attribute rdma.dra.io/gpudirect).
type GPUDirect string

// The GPUDirect selections; empty selects none.
const (
	GPUDirectDMABuf  GPUDirect = discovery.GPUDirectDMABuf
	GPUDirectPeermem GPUDirect = discovery.GPUDirectPeermem
	// GPUDirectAny: a port that has either.
	GPUDirectAny GPUDirect = "any"
)

// GPUDirects lists the GPUDirect selections in the order help and errors name them.
var GPUDirects = []GPUDirect{GPUDirectDMABuf, GPUDirectPeermem, GPUDirectAny}

// Defaults of the command's flags.
const (
	DefaultKind     = KindTemplate
	DefaultAlign    = AlignPCIe
	DefaultGPUClass = "gpu.nvidia.com"
	DefaultNICClass = "rdma-exclusive"
)

// MaxDevices bounds GPUs and NICs each, as the command's flags do. A claim holds at most
// resourceapi.AllocationResultsMaxSize devices in all, which Validate checks too.
const MaxDevices = 64

// Options say what to write. Each field is the flag of `rdma-dra claim` of the same name.
type Options struct {
	Kind      Kind
	Name      string
	Namespace string // empty: none, kubectl's current namespace
	GPUs      int
	NICs      int
	Align     Align
	GPUClass  string
	NICClass  string
	// DistinctRails adds distinctAttribute rdma.dra.io/rail over the NIC requests.
	DistinctRails bool
	// GPUDirect, when not empty, selects NICs that publish rdma.dra.io/gpudirect.
	GPUDirect GPUDirect
}

// DefaultName is the name of the object when --name is not given: gpu-nic-8x8.
func DefaultName(gpus, nics int) string {
	return fmt.Sprintf("gpu-nic-%dx%d", gpus, nics)
}

// alignAttribute is the attribute each group's constraint matches.
var alignAttribute = map[Align]resourceapi.FullyQualifiedName{
	AlignPCIe: resourceapi.FullyQualifiedName(deviceattribute.StandardDeviceAttributePCIeRoot),
	AlignNUMA: resourceapi.FullyQualifiedName(deviceattribute.StandardDeviceAttributeNUMANode),
}

// railAttribute is what DistinctRails keeps apart.
const railAttribute = resourceapi.FullyQualifiedName(devicemodel.AttrRail)

// Validate returns the first thing wrong with o, naming the flag and saying why.
func (o Options) Validate() error {
	if !slices.Contains(Kinds, o.Kind) {
		return fmt.Errorf("unknown --%s %q: want %s", FlagKind, o.Kind, Choices(Kinds))
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{FlagGPUs, o.GPUs}, {FlagNICs, o.NICs}} {
		if n.v < 1 || n.v > MaxDevices {
			return fmt.Errorf("--%s must be 1 to %d, got %d", n.flag, MaxDevices, n.v)
		}
	}
	if total := o.GPUs + o.NICs; total > resourceapi.AllocationResultsMaxSize {
		return fmt.Errorf("--%s %d and --%s %d are %d devices, but a claim holds at most %d (resource.k8s.io/v1): "+
			"give the pod two claims, each with its share of the pairs", FlagGPUs, o.GPUs, FlagNICs, o.NICs, total, resourceapi.AllocationResultsMaxSize)
	}
	if err := o.validateAlign(); err != nil {
		return err
	}
	if o.GPUDirect != "" && !slices.Contains(GPUDirects, o.GPUDirect) {
		return fmt.Errorf("unknown --%s %q: want %s", FlagGPUDirect, o.GPUDirect, Choices(GPUDirects))
	}
	for _, c := range []struct{ flag, v string }{{FlagGPUClass, o.GPUClass}, {FlagNICClass, o.NICClass}} {
		if msgs := validation.IsDNS1123Subdomain(c.v); len(msgs) > 0 {
			return fmt.Errorf("--%s %q is not a DeviceClass name: %s", c.flag, c.v, strings.Join(msgs, "; "))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		return fmt.Errorf("--%s %q is not an object name: %s", FlagName, o.Name, strings.Join(msgs, "; "))
	}
	if o.Namespace != "" {
		if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
			return fmt.Errorf("--%s %q is not a namespace name: %s", FlagNamespace, o.Namespace, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// validateAlign checks that the GPUs split evenly over the NICs when they are aligned:
// every NIC gets a group of GPUs of its own, all of the same size.
func (o Options) validateAlign() error {
	if !slices.Contains(Aligns, o.Align) {
		return fmt.Errorf("unknown --%s %q: want %s", FlagAlign, o.Align, Choices(Aligns))
	}
	if o.Align == AlignNone {
		return nil
	}
	what := alignAttribute[o.Align]
	if o.NICs > o.GPUs {
		return fmt.Errorf("--%s %d is more than --%s %d: with --%s %s each NIC shares %s with a GPU of its own, "+
			"so %s would have no GPU to align with; ask for at most %d NICs, or use --%s %s",
			FlagNICs, o.NICs, FlagGPUs, o.GPUs, FlagAlign, o.Align, what, nics(o.NICs-o.GPUs), o.GPUs, FlagAlign, AlignNone)
	}
	if o.GPUs%o.NICs != 0 {
		return fmt.Errorf("--%s %d is not a multiple of --%s %d: with --%s %s each NIC shares %s with the same number of GPUs; "+
			"for %d GPUs ask for %s NICs", FlagGPUs, o.GPUs, FlagNICs, o.NICs, FlagAlign, o.Align, what, o.GPUs, Choices(divisors(o.GPUs)))
	}
	return nil
}

// Warnings are what the command prints to stderr about valid options: a claim the API
// accepts but that some clusters can never allocate.
func (o Options) Warnings() []string {
	var out []string
	if o.Align == AlignNUMA {
		// NVIDIA's GPU driver publishes resource.kubernetes.io/pcieRoot, but no NUMA
		// attribute for GPUs (only gpu.nvidia.com/numa for VFIO passthrough devices):
		// a matchAttribute that a device lacks never matches it.
		if o.GPUClass == DefaultGPUClass {
			out = append(out, fmt.Sprintf("--%s %s: the GPU driver of %s publishes no %s for its GPUs, so this claim is never allocated; use --%s %s",
				FlagAlign, AlignNUMA, DefaultGPUClass, alignAttribute[AlignNUMA], FlagAlign, AlignPCIe))
		} else {
			out = append(out, fmt.Sprintf("--%s %s: the devices of %s must publish %s (this driver's ports do); a device without it is never chosen",
				FlagAlign, AlignNUMA, o.GPUClass, alignAttribute[AlignNUMA]))
		}
	}
	return out
}

// GPURequest and NICRequest are the names of the requests, from 0.
func GPURequest(i int) string { return "gpu-" + strconv.Itoa(i) }

// NICRequest is the name of NIC request i.
func NICRequest(i int) string { return "nic-" + strconv.Itoa(i) }

// Build returns the object o describes, a *resourceapi.ResourceClaimTemplate or a
// *resourceapi.ResourceClaim, after checking o and then the object against the API's
// limits.
func Build(o Options) (runtime.Object, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	spec := o.spec()
	meta := metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace}
	var obj runtime.Object
	switch o.Kind {
	case KindTemplate:
		obj = &resourceapi.ResourceClaimTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: string(KindTemplate)},
			ObjectMeta: meta,
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
		}
	default:
		obj = &resourceapi.ResourceClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: string(KindClaim)},
			ObjectMeta: meta,
			Spec:       spec,
		}
	}
	if errs := ValidateObject(obj); len(errs) > 0 {
		return nil, fmt.Errorf("the generated %s is not valid: %w", o.Kind, errs.ToAggregate())
	}
	return obj, nil
}

// spec builds the claim of valid options.
func (o Options) spec() resourceapi.ResourceClaimSpec {
	var dc resourceapi.DeviceClaim
	for i := range o.GPUs {
		dc.Requests = append(dc.Requests, request(GPURequest(i), o.GPUClass, nil))
	}
	var selectors []resourceapi.DeviceSelector
	if o.GPUDirect != "" {
		selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: gpuDirectCEL(o.GPUDirect)}}}
	}
	for i := range o.NICs {
		dc.Requests = append(dc.Requests, request(NICRequest(i), o.NICClass, selectors))
	}
	if attr, ok := alignAttribute[o.Align]; ok {
		perNIC := o.GPUs / o.NICs
		for i := range o.NICs {
			names := make([]string, 0, perNIC+1)
			for g := i * perNIC; g < (i+1)*perNIC; g++ {
				names = append(names, GPURequest(g))
			}
			names = append(names, NICRequest(i))
			dc.Constraints = append(dc.Constraints, resourceapi.DeviceConstraint{Requests: names, MatchAttribute: ptr.To(attr)})
		}
	}
	if o.DistinctRails {
		names := make([]string, o.NICs)
		for i := range names {
			names[i] = NICRequest(i)
		}
		dc.Constraints = append(dc.Constraints, resourceapi.DeviceConstraint{Requests: names, DistinctAttribute: ptr.To(railAttribute)})
	}
	return resourceapi.ResourceClaimSpec{Devices: dc}
}

// request asks for exactly one device of class. The allocation mode and count are left
// to the API's defaults (ExactCount, 1), as a person would write them.
func request(name, class string, selectors []resourceapi.DeviceSelector) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Selectors: selectors}}
}

// gpuDirectCEL selects ports by rdma.dra.io/gpudirect. A port without GPUDirect has no
// such attribute, and reading an attribute a device lacks is an evaluation error, which
// aborts the whole allocation instead of skipping the device: hence the optional field
// (.?) with a value for the missing case.
func gpuDirectCEL(g GPUDirect) string {
	domain, id, _ := strings.Cut(string(devicemodel.AttrGPUDirect), "/")
	ref := fmt.Sprintf("device.attributes[%s].?%s.orValue(\"\")", strconv.Quote(domain), id)
	if g == GPUDirectAny {
		quoted := make([]string, 0, len(GPUDirects))
		for _, v := range GPUDirects {
			if v != GPUDirectAny {
				quoted = append(quoted, strconv.Quote(string(v)))
			}
		}
		return fmt.Sprintf("%s in [%s]", ref, strings.Join(quoted, ", "))
	}
	return fmt.Sprintf("%s == %s", ref, strconv.Quote(string(g)))
}

// Marshal writes obj as YAML: sigs.k8s.io/yaml, whose keys are sorted, so the same
// options always give the same bytes. The empty objects the Go types always carry
// (a claim's status, a template's spec.metadata) are left out, as a person would; a
// long CEL expression is folded onto a second line, which YAML reads back as one.
func Marshal(obj runtime.Object) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode json: %w", err)
	}
	dropEmpty(doc, "status")
	if spec, ok := doc["spec"].(map[string]any); ok {
		dropEmpty(spec, "metadata")
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return out, nil
}

// dropEmpty deletes m[key] when it is an empty object.
func dropEmpty(m map[string]any, key string) {
	if v, ok := m[key].(map[string]any); ok && len(v) == 0 {
		delete(m, key)
	}
}

// Generate is Build and Marshal: the YAML of the object o describes.
func Generate(o Options) ([]byte, error) {
	obj, err := Build(o)
	if err != nil {
		return nil, err
	}
	return Marshal(obj)
}

// Choices writes values as help and errors list them: "pcie, numa or none".
func Choices[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// nics is "1 NIC" or "n NICs".
func nics(n int) string {
	if n == 1 {
		return "1 NIC"
	}
	return strconv.Itoa(n) + " NICs"
}

// divisors lists the divisors of n, as strings for Choices.
func divisors(n int) []string {
	var out []string
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			out = append(out, strconv.Itoa(d))
		}
	}
	return out
}
