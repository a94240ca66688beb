package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// rdma_cm's numbers on the test's fake host; the runtime must take them from the node.
const cmMajor, cmMinor = 10, 58

// node is what a container should see of one device node.
type node struct {
	Path         string
	Type         string
	Major, Minor int64
}

// TestInjection loads each case's spec with the CDI library, as the container runtime
// does, injects all of the claim's device IDs into an OCI spec, and checks the device
// nodes, cgroup rules, environment and hooks the container ends up with.
func TestInjection(t *testing.T) {
	for _, tc := range specCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			devRoot, hasCM := fakeDevRoot(t, tc)
			specDir := t.TempDir()
			w := NewWriter(Options{SpecDir: specDir, DevRoot: devRoot, HookPath: testHookPath, Exists: func(p string) bool {
				if filepath.Base(p) == "rdma_cm" {
					return hasCM
				}
				return tc.exists(p)
			}})
			ids, err := w.Write(ctx, testClaimUID, tc.devices)
			if err != nil {
				t.Fatal(err)
			}
			// The kubelet hands a container the IDs of all its devices, duplicates and all.
			var all []string
			for _, l := range ids {
				all = append(all, l...)
			}
			got := inject(t, specDir, all)

			var want []node
			for _, d := range tc.devices {
				want = append(want, wantNodes(tc, d)...)
			}
			if hasCM {
				want = append(want, node{"/dev/infiniband/rdma_cm", "c", cmMajor, cmMinor})
			}
			checkNodes(t, got, want)
			if diff := cmp.Diff(append([]string{"PATH=/usr/bin"}, tc.wantEnv...), got.Process.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			checkHooks(t, got, tc.wantHookArgs)
		})
	}
}

// TestInjectionOfOneRequest checks a container that gets only one request of a claim:
// its own nodes, and the claim's environment and rdma_cm.
func TestInjectionOfOneRequest(t *testing.T) {
	var tc specCase
	for _, c := range specCases() {
		if c.name == "memlock" {
			tc = c
		}
	}
	_, ctx := ktesting.NewTestContext(t)
	devRoot, hasCM := fakeDevRoot(t, tc)
	specDir := t.TempDir()
	w := NewWriter(Options{SpecDir: specDir, DevRoot: devRoot, HookPath: testHookPath, Exists: func(p string) bool {
		return filepath.Base(p) != "rdma_cm" || hasCM
	}})
	ids, err := w.Write(ctx, testClaimUID, tc.devices)
	if err != nil {
		t.Fatal(err)
	}
	got := inject(t, specDir, ids[1])
	want := wantNodes(tc, tc.devices[1])
	if hasCM {
		want = append(want, node{"/dev/infiniband/rdma_cm", "c", cmMajor, cmMinor})
	}
	checkNodes(t, got, want)
	if diff := cmp.Diff(append([]string{"PATH=/usr/bin"}, tc.wantEnv...), got.Process.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	checkHooks(t, got, tc.wantHookArgs)
}

// fakeDevRoot makes a host /dev with infiniband/rdma_cm as a real character device
// unless the case says it is missing. Only rdma_cm needs a node: the other nodes carry
// their numbers in the spec. mknod needs CAP_MKNOD; without it the test goes on as if
// the host had no rdma_cm.
func fakeDevRoot(t *testing.T, tc specCase) (string, bool) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "infiniband")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !tc.exists("rdma_cm") {
		return root, false
	}
	err := unix.Mknod(filepath.Join(dir, "rdma_cm"), unix.S_IFCHR|0o666, int(unix.Mkdev(cmMajor, cmMinor)))
	if errors.Is(err, unix.EPERM) {
		t.Logf("cannot mknod (%v): testing without rdma_cm", err)
		return root, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return root, true
}

// inject loads the specs in specDir with the CDI library and injects ids into an OCI
// spec that already has an environment variable.
func inject(t *testing.T, specDir string, ids []string) *oci.Spec {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(specDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("load specs: %v", err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("spec errors: %v", errs)
	}
	spec := &oci.Spec{Process: &oci.Process{Env: []string{"PATH=/usr/bin"}}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("inject %v: %v (unresolved %v)", ids, err, unresolved)
	}
	return spec
}

// wantNodes is the nodes one device should bring, worked out from the case directly.
func wantNodes(tc specCase, d ClaimDevice) []node {
	n := func(c *discovery.CharDev) node {
		return node{"/dev/infiniband/" + c.Name, "c", int64(c.Major), int64(c.Minor)}
	}
	var out []node
	set := *d.Config.CharDevices
	for _, p := range d.AllPorts() {
		out = append(out, n(p.Verbs))
		if p.UMAD != nil && set.WantsUMAD() && tc.exists(p.UMAD.Name) {
			out = append(out, n(p.UMAD))
		}
		if p.ISSM != nil && set.WantsISSM() && tc.exists(p.ISSM.Name) {
			out = append(out, n(p.ISSM))
		}
	}
	return out
}

// checkNodes checks that the container has each wanted node exactly once (two ports of
// one adapter share a uverbs node) and a cgroup rule that allows it.
func checkNodes(t *testing.T, got *oci.Spec, want []node) {
	t.Helper()
	uniq := map[string]node{}
	for _, n := range want {
		uniq[n.Path] = n
	}
	want = want[:0]
	for _, n := range uniq {
		want = append(want, n)
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Path < want[j].Path })

	var nodes []node
	if got.Linux != nil {
		for _, d := range got.Linux.Devices {
			nodes = append(nodes, node{d.Path, d.Type, d.Major, d.Minor})
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Path < nodes[j].Path })
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("device nodes (-want +got):\n%s", diff)
	}
	allowed := map[node]bool{}
	if got.Linux != nil && got.Linux.Resources != nil {
		for _, r := range got.Linux.Resources.Devices {
			if r.Allow && r.Access == "rwm" && r.Major != nil && r.Minor != nil {
				allowed[node{Type: r.Type, Major: *r.Major, Minor: *r.Minor}] = true
			}
		}
	}
	for _, n := range want {
		if !allowed[node{Type: n.Type, Major: n.Major, Minor: n.Minor}] {
			t.Errorf("no cgroup rule allows %s (%s %d:%d)", n.Path, n.Type, n.Major, n.Minor)
		}
	}
}

// checkHooks checks for exactly the memlock hook, once, or no hook at all.
func checkHooks(t *testing.T, got *oci.Spec, wantArgs []string) {
	t.Helper()
	var hooks []oci.Hook
	if got.Hooks != nil {
		hooks = got.Hooks.CreateContainer
		//nolint:staticcheck // SA1019: Prestart is deprecated, and a hook there is exactly what must not appear.
		if n := len(got.Hooks.Prestart) + len(got.Hooks.CreateRuntime) + len(got.Hooks.StartContainer) + len(got.Hooks.Poststart) + len(got.Hooks.Poststop); n > 0 {
			t.Errorf("%d hooks outside createContainer", n)
		}
	}
	var want []oci.Hook
	if wantArgs != nil {
		timeout := hookTimeoutSeconds
		want = []oci.Hook{{Path: testHookPath, Args: wantArgs, Timeout: &timeout}}
	}
	if diff := cmp.Diff(want, hooks); diff != "" {
		t.Errorf("createContainer hooks (-want +got):\n%s", diff)
	}
}

// TestAttachedHook: a claim with an attached device gets the createRuntime hook that
// waits for the attachment, once, whatever the number of containers' devices; a claim
// without one, or a writer without a marks directory, gets none.
func TestAttachedHook(t *testing.T) {
	const dir = "/var/lib/kubelet/plugins/rdma.dra.io/attached"
	def := cfg(nil)
	attached := shared("nic", testShareID, roce("mlx5_bond_0", 1, 0, 0, ptr.To(3)), def)
	attached.Attached = true
	plain := exclusive("ib", ib("mlx5_0", 1, 1, 1), def)
	timeout := hookTimeoutSeconds
	want := []oci.Hook{{Path: testHookPath, Args: []string{"rdma-dra-cdi-hook", "attached", "--dir", dir, "--claim", testClaimUID}, Timeout: &timeout}}
	tests := []struct {
		name        string
		devices     []ClaimDevice
		attachedDir string
		want        []oci.Hook
	}{
		{name: "attached and plain device", devices: []ClaimDevice{attached, plain}, attachedDir: dir, want: want},
		{name: "plain devices only", devices: []ClaimDevice{plain}, attachedDir: dir},
		{name: "no marks directory", devices: []ClaimDevice{attached}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			specDir := t.TempDir()
			devRoot, hasCM := fakeDevRoot(t, specCase{})
			w := NewWriter(Options{SpecDir: specDir, DevRoot: devRoot, HookPath: testHookPath, AttachedDir: tc.attachedDir,
				Exists: func(p string) bool { return filepath.Base(p) != "rdma_cm" || hasCM }})
			ids, err := w.Write(ctx, testClaimUID, tc.devices)
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, l := range ids {
				all = append(all, l...)
			}
			got := inject(t, specDir, all)
			var hooks []oci.Hook
			if got.Hooks != nil {
				hooks = got.Hooks.CreateRuntime
			}
			if diff := cmp.Diff(tc.want, hooks); diff != "" {
				t.Errorf("createRuntime hooks (-want +got):\n%s", diff)
			}
		})
	}
	_, ctx := ktesting.NewTestContext(t)
	if _, _, err := BuildSpec(ctx, testClaimUID, []ClaimDevice{attached}, Options{AttachedDir: dir, Exists: func(string) bool { return true }}); err == nil ||
		!strings.Contains(err.Error(), "network attachment, but no hook path") {
		t.Errorf("attached device without a hook path: %v", err)
	}
}
