package schedperf

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
	"github.com/rdma-dra/rdma-dra-driver/test/scale"
)

// The labels of the workloads, for scheduler_perf's -perf-scheduling-label-filter.
const (
	// FullLabel selects the 1000-node workloads. It is scheduler_perf's default filter,
	// so a run without -perf-scheduling-label-filter runs them.
	FullLabel = "performance"
	// SmokeLabel selects the small workloads: a quick check that the setup works.
	SmokeLabel = "smoke"
	// AlternativeLabel marks the workloads of the models other than the default:
	// "performance,-alternative" runs the reference and the default model only.
	AlternativeLabel = "alternative"
)

// TestCase is the name of the one test case of the config; the workloads are its
// sub-benchmarks (BenchmarkPerfScheduling/RdmaVsReference/<workload>).
const TestCase = "RdmaVsReference"

// size is a cluster size of the workloads.
type size struct {
	nodes int
	label string
	// duration is how long the steady state is measured.
	duration time.Duration
	fills    []fill
}

// sizes: the smoke size checks that every template works, so it runs the half fill
// only, which uses them all.
var sizes = []size{
	{nodes: 50, label: SmokeLabel, duration: 10 * time.Second, fills: []fill{half}},
	{nodes: 1000, label: FullLabel, duration: 30 * time.Second, fills: []fill{empty, half}},
}

// variant is a device model the nodes publish on our side of a workload.
type variant struct {
	// name prefixes the names of its sides; empty for the default model, whose
	// workloads keep the names of earlier runs (share_empty_1000nodes).
	name  string
	model scale.Model
	// pods are what its measured pods ask for: a share, a whole port or both.
	pods []pod
}

// key names the variant's parameters and files.
func (v variant) key() string {
	if v.name == "" {
		return "rdma"
	}
	return v.name
}

// pod is what a measured pod of our side asks for.
type pod string

const (
	podShare pod = "share"
	podPort  pod = "port"
)

// variants are the device models measured side by side (docs/benchmarks-schedperf.md):
// the default model; one device per port whose consumable shares serve shares and whole
// ports alike, without counters; the one-device-per-NIC shape (whole ports only, no
// counters); the default model with only the attributes the classes select on.
var variants = []variant{
	{model: scale.ModelDefault, pods: []pod{podShare, podPort}},
	{name: "capacity", model: scale.ModelCapacity, pods: []pod{podShare, podPort}},
	{name: "pernic", model: scale.ModelPerNIC, pods: []pod{podPort}},
	{name: "fewattrs", model: scale.ModelFewAttributes, pods: []pod{podShare, podPort}},
}

// side is whose slices the nodes publish and what each measured pod's claim asks for.
type side struct {
	name string
	// reference: the suite's test driver, its 10-device slice per node and its class;
	// otherwise this driver's slices of variant and a claim for pod.
	reference bool
	variant   variant
	pod       pod
}

// param is the name of the side's claim template's count parameter.
func (s side) param() string { return strings.ReplaceAll(s.name, "-", "") + "ClaimTemplate" }

// sides are the reference and every pod of every variant.
func sides() []side {
	out := []side{{name: "reference", reference: true}}
	for _, v := range variants {
		for _, p := range v.pods {
			out = append(out, side{name: sideName(v, p), variant: v, pod: p})
		}
	}
	return out
}

// sideName is the name of the side of variant v whose pods ask for p: share, port,
// capacity-share, ...
func sideName(v variant, p pod) string {
	if v.name == "" {
		return string(p)
	}
	return v.name + "-" + string(p)
}

// request is what a claim of pod p asks for in model m, whose ports have shares shares:
// a whole port is an exclusive device, or in the capacity model every share of the
// port's one device.
func request(m scale.Model, p pod, shares int64) Request {
	switch {
	case p == podShare:
		return Request{Class: ShareClass}
	case m == scale.ModelCapacity:
		return Request{Class: ShareClass, Shares: shares}
	default:
		return Request{Class: PortClass}
	}
}

// fill is how much of the cluster is allocated before the measurement: that fraction of
// the nodes' units (the reference slices' devices, our ports taken whole) in claims that
// scheduler_perf's allocResourceClaims allocates on random nodes.
type fill struct {
	name     string
	fraction float64
}

var (
	empty = fill{"empty", 0}
	half  = fill{"half", 0.5}
)

const (
	// referenceDevices is the number of devices in each reference slice, upstream's
	// default for SchedulingWithResourceClaimTemplate.
	referenceDevices = 10
	// measuredPods is how many pods are kept pending during the steady state: each one
	// scheduled is deleted and replaced, so that the cluster stays at its fill level.
	measuredPods = 10
)

// upstreamFiles are the paths of the scheduler_perf templates the config uses.
type upstreamFiles struct {
	node, slice, class, claimTemplate, fillClaim, pod string
}

// upstreamPaths returns the absolute paths of the templates in scheduler_perf's DRA
// template directory dir, checking that each exists.
func upstreamPaths(dir string) (upstreamFiles, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return upstreamFiles{}, fmt.Errorf("resolve %s: %w", dir, err)
	}
	j := func(name string) string { return filepath.Join(abs, name) }
	f := upstreamFiles{
		node:          j("node-with-dra-test-driver.yaml"),
		slice:         j("resourceslice-basic-devices.yaml"),
		class:         j("deviceclass.yaml"),
		claimTemplate: j("resourceclaimtemplate.yaml"),
		fillClaim:     j("resourceclaim.yaml"),
		pod:           j("pod-with-claim-template.yaml"),
	}
	for _, p := range []string{f.node, f.slice, f.class, f.claimTemplate, f.fillClaim, f.pod} {
		if _, err := os.Stat(p); err != nil {
			return upstreamFiles{}, fmt.Errorf("scheduler_perf template: %w", err)
		}
	}
	return f, nil
}

// ourFiles are the paths of the templates Write writes.
type ourFiles struct {
	classes []string
	// slices and fillClaims are by variant key, claimTemplates by side name.
	slices         map[string][]string
	fillClaims     map[string]string
	claimTemplates map[string]string
	// ports is the number of ports of a node, the same in every variant.
	ports int
}

// UpstreamTemplates returns scheduler_perf's DRA template directory in the module cache
// copy of the k8s.io/kubernetes version that the test module at testModule requires.
func UpstreamTemplates(ctx context.Context, testModule string) (string, error) {
	cmd := exec.CommandContext(ctx, controlplane.GoCommand(), "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = testModule
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("find k8s.io/kubernetes in the module cache (go list -m in %s): %w", testModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("k8s.io/kubernetes is not in the module cache; run `go mod download k8s.io/kubernetes` in %s", testModule)
	}
	return filepath.Join(dir, "test", "integration", "scheduler_perf", "dra", "templates"), nil
}

// Options say what Write writes where.
type Options struct {
	// Repo is the repository root, for the chart's RdmaPools.
	Repo string
	// Upstream is scheduler_perf's DRA template directory (UpstreamTemplates).
	Upstream string
	// Dir receives the templates and the config.
	Dir string
	// Profile is the mock profile of every node; DefaultProfile if empty.
	Profile string
}

// Write writes our templates and performance-config.yaml into o.Dir and returns the
// config's path. Every path in the config is absolute.
func Write(ctx context.Context, o Options) (string, error) {
	if o.Profile == "" {
		o.Profile = DefaultProfile
	}
	up, err := upstreamPaths(o.Upstream)
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", o.Dir, err)
	}

	files := map[string][]byte{}
	ours := ourFiles{slices: map[string][]string{}, fillClaims: map[string]string{}, claimTemplates: map[string]string{}}
	add := func(name string, data []byte) string {
		files[name] = data
		return filepath.Join(dir, name)
	}
	for _, v := range variants {
		node, err := SliceTemplates(ctx, o.Profile, v.model, filepath.Join(dir, "mock-"+v.key()))
		if err != nil {
			return "", err
		}
		if ours.ports != 0 && node.Ports != ours.ports {
			return "", fmt.Errorf("the %s model of %s has %d ports, the default model %d", v.model, o.Profile, node.Ports, ours.ports)
		}
		ours.ports = node.Ports
		for i, data := range node.Slices {
			ours.slices[v.key()] = append(ours.slices[v.key()], add(fmt.Sprintf("%s-slice-%d.yaml", v.key(), i), data))
		}
		// The fill takes whole ports, whatever the measured pods ask for, as the scale
		// harness's fill does.
		data, err := FillClaim(v.key(), request(v.model, podPort, node.Shares))
		if err != nil {
			return "", err
		}
		ours.fillClaims[v.key()] = add("resourceclaim-fill-"+v.key()+".yaml", data)
		for _, p := range v.pods {
			data, err := ClaimTemplate(request(v.model, p, node.Shares))
			if err != nil {
				return "", err
			}
			s := side{name: sideName(v, p)}
			ours.claimTemplates[s.name] = add("claimtemplate-"+s.name+".yaml", data)
		}
	}
	classes, err := ClassTemplates(o.Repo)
	if err != nil {
		return "", err
	}
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		ours.classes = append(ours.classes, add("deviceclass-"+name+".yaml", classes[name]))
	}

	data, err := yaml.Marshal(config(up, ours))
	if err != nil {
		return "", fmt.Errorf("encode the performance config: %w", err)
	}
	configPath := add("performance-config.yaml", append([]byte("# Generated by test/scale/schedperf (Write) for one run.\n"), data...))

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
	}
	return configPath, nil
}

// The config's schema: the parts of scheduler_perf's testCase, workload and ops that
// are used here, with the field names of its YAML files (it decodes them strictly).
type (
	testCase struct {
		Name             string          `json:"name"`
		FeatureGates     map[string]bool `json:"featureGates"`
		WorkloadTemplate []op            `json:"workloadTemplate"`
		Workloads        []workload      `json:"workloads"`
	}
	workload struct {
		Name   string         `json:"name"`
		Labels []string       `json:"labels"`
		Params map[string]any `json:"params"`
	}
	op struct {
		Opcode           string         `json:"opcode"`
		NodeTemplatePath string         `json:"nodeTemplatePath,omitempty"`
		TemplatePath     string         `json:"templatePath,omitempty"`
		PodTemplatePath  string         `json:"podTemplatePath,omitempty"`
		Namespace        string         `json:"namespace,omitempty"`
		Count            int            `json:"count,omitempty"`
		CountParam       string         `json:"countParam,omitempty"`
		TemplateParams   map[string]any `json:"templateParams,omitempty"`
		SteadyState      bool           `json:"steadyState,omitempty"`
		DurationParam    string         `json:"durationParam,omitempty"`
		CollectMetrics   bool           `json:"collectMetrics,omitempty"`
	}
)

// The workload parameters. An op whose side is not measured gets a count of 0, so that
// every workload runs the same ops: the nodes carry either the reference slices or one
// variant's, and exactly one claim template exists.
const (
	paramNodes                  = "nodes"
	paramReferenceSlices        = "referenceSlices"
	paramReferenceFillClaims    = "referenceFillClaims"
	paramReferenceClaimTemplate = "referenceClaimTemplate"
	paramDuration               = "duration"
)

// slicesParam and fillParam are the count parameters of a variant's slices and fill
// claims.
func slicesParam(v variant) string { return v.key() + "Slices" }
func fillParam(v variant) string   { return v.key() + "FillClaims" }

// config is the one test case: nodes, then either the reference slices (upstream's
// template) or a variant's, every class, the fill, one claim template and the measured
// pods, kept at measuredPods pending in a steady state for the workload's duration with
// scheduler_perf's metrics (SchedulingThroughput among them) collected.
func config(up upstreamFiles, ours ourFiles) []testCase {
	ops := []op{
		{Opcode: "createNodes", NodeTemplatePath: up.node, CountParam: "$" + paramNodes},
		{Opcode: "createAny", TemplatePath: up.slice, CountParam: "$" + paramReferenceSlices,
			TemplateParams: map[string]any{"numDevices": referenceDevices}},
	}
	for _, v := range variants {
		for _, p := range ours.slices[v.key()] {
			ops = append(ops, op{Opcode: "createAny", TemplatePath: p, CountParam: "$" + slicesParam(v)})
		}
	}
	ops = append(ops, op{Opcode: "createAny", TemplatePath: up.class})
	for _, p := range ours.classes {
		ops = append(ops, op{Opcode: "createAny", TemplatePath: p})
	}
	ops = append(ops, op{Opcode: "createAny", TemplatePath: up.fillClaim, Namespace: "init", CountParam: "$" + paramReferenceFillClaims})
	for _, v := range variants {
		ops = append(ops, op{Opcode: "createAny", TemplatePath: ours.fillClaims[v.key()], Namespace: "init", CountParam: "$" + fillParam(v)})
	}
	ops = append(ops,
		op{Opcode: "allocResourceClaims", Namespace: "init"},
		op{Opcode: "createAny", TemplatePath: up.claimTemplate, Namespace: "test", CountParam: "$" + paramReferenceClaimTemplate},
	)
	for _, s := range sides() {
		if !s.reference {
			ops = append(ops, op{Opcode: "createAny", TemplatePath: ours.claimTemplates[s.name], Namespace: "test", CountParam: "$" + s.param()})
		}
	}
	ops = append(ops, op{Opcode: "createPods", Namespace: "test", Count: measuredPods, SteadyState: true,
		DurationParam: "$" + paramDuration, PodTemplatePath: up.pod, CollectMetrics: true})

	var workloads []workload
	for _, sz := range sizes {
		for _, f := range sz.fills {
			for _, s := range sides() {
				labels := []string{sz.label}
				if !s.reference && s.variant.name != "" {
					labels = append(labels, AlternativeLabel)
				}
				workloads = append(workloads, workload{
					Name:   WorkloadName(s.name, f.name, sz.nodes),
					Labels: labels,
					Params: params(sz, f, s, ours.ports),
				})
			}
		}
	}
	return []testCase{{
		Name: TestCase,
		// DynamicResourceAllocation is GA; the other two are beta and on by default in
		// 1.37, set so that the run does not depend on that (our slices need them).
		FeatureGates:     map[string]bool{"DynamicResourceAllocation": true, "DRAPartitionableDevices": true, "DRAConsumableCapacity": true},
		WorkloadTemplate: ops,
		Workloads:        workloads,
	}}
}

// WorkloadName is the name of the workload of side at fill on nodes nodes.
func WorkloadName(side, fill string, nodes int) string {
	return fmt.Sprintf("%s_%s_%dnodes", side, fill, nodes)
}

// ParseWorkloadName is the inverse of WorkloadName.
func ParseWorkloadName(name string) (side, fill string, nodes int, err error) {
	side, rest, ok1 := strings.Cut(name, "_")
	fill, n, ok2 := strings.Cut(rest, "_")
	digits, ok3 := strings.CutSuffix(n, "nodes")
	nodes, err = strconv.Atoi(digits)
	if !ok1 || !ok2 || !ok3 || err != nil || side == "" || fill == "" {
		return "", "", 0, fmt.Errorf("workload %q is not <side>_<fill>_<N>nodes", name)
	}
	return side, fill, nodes, nil
}

// params are the workload parameters of side s at size sz and fill f; ports is the
// number of ports of one of our nodes.
func params(sz size, f fill, s side, ports int) map[string]any {
	one := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	units := ports
	if s.reference {
		units = referenceDevices
	}
	fillClaims := int(math.Round(f.fraction * float64(sz.nodes*units)))
	p := map[string]any{
		paramNodes:                  sz.nodes,
		paramReferenceSlices:        sz.nodes * one(s.reference),
		paramReferenceFillClaims:    fillClaims * one(s.reference),
		paramReferenceClaimTemplate: one(s.reference),
		paramDuration:               sz.duration.String(),
	}
	for _, v := range variants {
		ours := !s.reference && s.variant.key() == v.key()
		p[slicesParam(v)] = sz.nodes * one(ours)
		p[fillParam(v)] = fillClaims * one(ours)
	}
	for _, other := range sides() {
		if !other.reference {
			p[other.param()] = one(other.name == s.name)
		}
	}
	return p
}
