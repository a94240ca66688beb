package claimgen

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// opts returns the options of `rdma-dra claim --gpus gpus`, every other flag at its
// default, changed by edit.
func opts(gpus int, edit func(*Options)) Options {
	o := Options{Kind: DefaultKind, GPUs: gpus, NICs: gpus, Align: DefaultAlign, GPUClass: DefaultGPUClass, NICClass: DefaultNICClass}
	if edit != nil {
		edit(&o)
	}
	if o.Name == "" {
		o.Name = DefaultName(o.GPUs, o.NICs)
	}
	return o
}

// TestGolden compares the YAML of whole objects with testdata/, which go test -update
// rewrites. The command's own test runs the same options through the flags.
func TestGolden(t *testing.T) {
	for _, tt := range []struct {
		file string
		opts Options
	}{
		{"gpus-8-align-pcie.yaml", opts(8, func(o *Options) { o.Align = AlignPCIe })},
		{"claim-gpus-8-nics-4-rails-dmabuf.yaml", opts(8, func(o *Options) {
			o.Kind, o.Name, o.Namespace, o.NICs = KindClaim, "trainer", "ml", 4
			o.DistinctRails, o.GPUDirect = true, GPUDirectDMABuf
		})},
	} {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Generate(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./pkg/claimgen -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}

// TestShape checks requests and constraints for each alignment and ratio of GPUs to NICs,
// and that the YAML reads back, strictly, as the object Build returned: nothing is lost
// to folding or to the empty objects Marshal leaves out.
func TestShape(t *testing.T) {
	pcieRoot := string(deviceattribute.StandardDeviceAttributePCIeRoot)
	numaNode := string(deviceattribute.StandardDeviceAttributeNUMANode)
	rail := string(devicemodel.AttrRail)
	tests := []struct {
		name         string
		opts         Options
		wantRequests []string
		// wantConstraints are "<attribute>: <requests>", match or distinct.
		wantConstraints []string
		wantSelector    string // on every NIC request
	}{
		{name: "one pair on a PCIe root", opts: opts(1, nil),
			wantRequests:    []string{"gpu-0", "nic-0"},
			wantConstraints: []string{"match " + pcieRoot + ": gpu-0 nic-0"}},
		{name: "two GPUs per NIC", opts: opts(4, func(o *Options) { o.NICs = 2 }),
			wantRequests: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "nic-0", "nic-1"},
			wantConstraints: []string{
				"match " + pcieRoot + ": gpu-0 gpu-1 nic-0",
				"match " + pcieRoot + ": gpu-2 gpu-3 nic-1"}},
		{name: "numa pairs with distinct rails", opts: opts(2, func(o *Options) { o.Align, o.DistinctRails = AlignNUMA, true }),
			wantRequests: []string{"gpu-0", "gpu-1", "nic-0", "nic-1"},
			wantConstraints: []string{
				"match " + numaNode + ": gpu-0 nic-0",
				"match " + numaNode + ": gpu-1 nic-1",
				"distinct " + rail + ": nic-0 nic-1"}},
		{name: "no alignment, more NICs than GPUs", opts: opts(1, func(o *Options) { o.Align, o.NICs = AlignNone, 3 }),
			wantRequests: []string{"gpu-0", "nic-0", "nic-1", "nic-2"}},
		{name: "16 pairs, the most one claim holds", opts: opts(16, func(o *Options) { o.GPUDirect = GPUDirectAny }),
			wantRequests: append(names("gpu-", 16), names("nic-", 16)...),
			wantConstraints: func() []string {
				var out []string
				for i := range 16 {
					out = append(out, "match "+pcieRoot+": "+GPURequest(i)+" "+NICRequest(i))
				}
				return out
			}(),
			wantSelector: `device.attributes["rdma.dra.io"].?gpudirect.orValue("") in ["dmabuf", "peermem"]`},
		{name: "peermem", opts: opts(1, func(o *Options) { o.GPUDirect = GPUDirectPeermem }),
			wantRequests:    []string{"gpu-0", "nic-0"},
			wantConstraints: []string{"match " + pcieRoot + ": gpu-0 nic-0"},
			wantSelector:    `device.attributes["rdma.dra.io"].?gpudirect.orValue("") == "peermem"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := Build(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := obj.(*resourceapi.ResourceClaimTemplate)
			d := tmpl.Spec.Spec.Devices
			var gotRequests []string
			for _, r := range d.Requests {
				gotRequests = append(gotRequests, r.Name)
				wantClass, wantSelectors := tt.opts.GPUClass, 0
				if strings.HasPrefix(r.Name, "nic-") {
					wantClass = tt.opts.NICClass
					if tt.wantSelector != "" {
						wantSelectors = 1
					}
				}
				if r.Exactly == nil || r.Exactly.DeviceClassName != wantClass || len(r.Exactly.Selectors) != wantSelectors {
					t.Errorf("request %s: %+v, want exactly one device of %s with %d selectors", r.Name, r.Exactly, wantClass, wantSelectors)
					continue
				}
				if wantSelectors == 1 && r.Exactly.Selectors[0].CEL.Expression != tt.wantSelector {
					t.Errorf("request %s: selector %q, want %q", r.Name, r.Exactly.Selectors[0].CEL.Expression, tt.wantSelector)
				}
			}
			if diff := cmp.Diff(tt.wantRequests, gotRequests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			var gotConstraints []string
			for _, c := range d.Constraints {
				switch {
				case c.MatchAttribute != nil:
					gotConstraints = append(gotConstraints, "match "+string(*c.MatchAttribute)+": "+strings.Join(c.Requests, " "))
				case c.DistinctAttribute != nil:
					gotConstraints = append(gotConstraints, "distinct "+string(*c.DistinctAttribute)+": "+strings.Join(c.Requests, " "))
				}
			}
			if diff := cmp.Diff(tt.wantConstraints, gotConstraints); diff != "" {
				t.Errorf("constraints (-want +got):\n%s", diff)
			}

			data, err := Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var back resourceapi.ResourceClaimTemplate
			if err := yaml.UnmarshalStrict(data, &back); err != nil {
				t.Fatalf("read back: %v\n%s", err, data)
			}
			if diff := cmp.Diff(tmpl, &back); diff != "" {
				t.Errorf("YAML reads back differently (-built +read):\n%s", diff)
			}
		})
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string // the whole message
	}{
		{name: "kind", opts: opts(8, func(o *Options) { o.Kind = "Claim" }),
			want: `unknown --kind "Claim": want ResourceClaimTemplate or ResourceClaim`},
		{name: "no GPUs", opts: opts(0, nil), want: "--gpus must be 1 to 64, got 0"},
		{name: "too many NICs for the flag", opts: opts(8, func(o *Options) { o.NICs = 65 }), want: "--nics must be 1 to 64, got 65"},
		{name: "more devices than a claim holds", opts: opts(17, nil),
			want: "--gpus 17 and --nics 17 are 34 devices, but a claim holds at most 32 (resource.k8s.io/v1): give the pod two claims, each with its share of the pairs"},
		{name: "align", opts: opts(8, func(o *Options) { o.Align = "pci" }), want: `unknown --align "pci": want pcie, numa or none`},
		{name: "more NICs than GPUs on PCIe roots", opts: opts(8, func(o *Options) { o.NICs = 9 }),
			want: "--nics 9 is more than --gpus 8: with --align pcie each NIC shares resource.kubernetes.io/pcieRoot with a GPU of its own, " +
				"so 1 NIC would have no GPU to align with; ask for at most 8 NICs, or use --align none"},
		{name: "uneven groups", opts: opts(8, func(o *Options) { o.NICs, o.Align = 3, AlignNUMA }),
			want: "--gpus 8 is not a multiple of --nics 3: with --align numa each NIC shares resource.kubernetes.io/numaNode with the same number of GPUs; for 8 GPUs ask for 1, 2, 4 or 8 NICs"},
		{name: "gpudirect", opts: opts(8, func(o *Options) { o.GPUDirect = "nvidia" }), want: `unknown --gpudirect "nvidia": want dmabuf, peermem or any`},
		{name: "class", opts: opts(8, func(o *Options) { o.GPUClass = "GPU" }),
			want: `--gpu-class "GPU" is not a DeviceClass name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{name: "name", opts: opts(8, func(o *Options) { o.Name = "gpu_nic" }),
			want: `--name "gpu_nic" is not an object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{name: "namespace", opts: opts(8, func(o *Options) { o.Namespace = "ml.team" }),
			want: `--namespace "ml.team" is not a namespace name: must not contain dots`},
		{name: "more NICs than GPUs unaligned", opts: opts(2, func(o *Options) { o.Align, o.NICs = AlignNone, 30 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if _, err := Build(tt.opts); (err != nil) != (tt.want != "") {
				t.Errorf("Build: %v", err)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts Options
		want []string
	}{
		{name: "pcie", opts: opts(8, nil)},
		{name: "numa with NVIDIA's GPUs", opts: opts(8, func(o *Options) { o.Align = AlignNUMA }),
			want: []string{"--align numa: the GPU driver of gpu.nvidia.com publishes no resource.kubernetes.io/numaNode for its GPUs, so this claim is never allocated; use --align pcie"}},
		{name: "numa with another class", opts: opts(8, func(o *Options) { o.Align, o.GPUClass = AlignNUMA, "gpu.example.com" }),
			want: []string{"--align numa: the devices of gpu.example.com must publish resource.kubernetes.io/numaNode (this driver's ports do); a device without it is never chosen"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.opts.Warnings()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAttributesArePublished: every attribute a claim of this package names is one the
// device model publishes, the one list of names; a rename there fails here.
func TestAttributesArePublished(t *testing.T) {
	published := map[resourceapi.QualifiedName]bool{}
	for _, a := range devicemodel.Attributes() {
		published[a.Name] = true
	}
	names := []resourceapi.QualifiedName{resourceapi.QualifiedName(railAttribute), devicemodel.AttrGPUDirect}
	for _, a := range alignAttribute {
		names = append(names, resourceapi.QualifiedName(a))
	}
	for _, n := range names {
		if !published[n] {
			t.Errorf("%s is not in devicemodel.Attributes", n)
		}
	}
	if !slices.Contains(Aligns, DefaultAlign) || !slices.Contains(Kinds, DefaultKind) {
		t.Error("a default is not among the values")
	}
}

// TestGPUDirectSelector evaluates each selector with the allocator's CEL library, as the
// API server compiles it, on ports with either way of GPUDirect RDMA and on one without:
// the port without the attribute is skipped, never an evaluation error (which would
// abort the whole allocation).
func TestGPUDirectSelector(t *testing.T) {
	port := func(g string) dracel.Device {
		d := dracel.Device{Driver: devicemodel.DefaultDriverName, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			devicemodel.AttrMode: {StringValue: ptr.To("exclusive")},
		}}
		if g != "" {
			d.Attributes[devicemodel.AttrGPUDirect] = resourceapi.DeviceAttribute{StringValue: ptr.To(g)}
		}
		return d
	}
	ports := map[string]dracel.Device{"dmabuf": port("dmabuf"), "peermem": port("peermem"), "none": port("")}
	for _, tt := range []struct {
		g    GPUDirect
		want []string
	}{
		{GPUDirectDMABuf, []string{"dmabuf"}},
		{GPUDirectPeermem, []string{"peermem"}},
		{GPUDirectAny, []string{"dmabuf", "peermem"}},
	} {
		t.Run(string(tt.g), func(t *testing.T) {
			sel, err := controller.CompileSelector(gpuDirectCEL(tt.g))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, name := range []string{"dmabuf", "none", "peermem"} {
				ok, _, err := sel.DeviceMatches(context.Background(), ports[name])
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
				if ok {
					got = append(got, name)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("selected (-want +got):\n%s", diff)
			}
		})
	}
}
