//go:build kernelvm

package invm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/test/kernel/rdmacore"
)

// cdiClaimUID is the claim the test prepares.
const cdiClaimUID = "3f2a9c1e-5b7d-4e8a-9c0f-1a2b3c4d5e6f"

// TestCDIWithRunc writes the CDI spec the kubelet plugin writes for a claim of a real
// soft-RoCE port, injects it into an OCI spec with the CDI library (as containerd and
// CRI-O do), and runs the container with runc: the container must see the port's uverbs
// node with the kernel's numbers, the NCCL environment with the GID index rdma-core
// shows, and the RLIMIT_MEMLOCK the claim asked for, raised by the memlock hook.
func TestCDIWithRunc(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := newRoCE(t, "rxe6", "veth6", "veth6p")
	run(t, "ip", "addr", "add", "192.168.81.1/24", "dev", r.Netdev)
	var port *discovery.Port
	eventually(t, "rxe6 has a GID index", func() (bool, string) {
		inv, err := discovery.New(discovery.Options{UseNetlink: true}).Discover(ctx)
		if err != nil {
			return false, err.Error()
		}
		for i := range inv.Ports {
			if p := &inv.Ports[i]; p.IBDev == r.IBDev && p.GIDIndex != nil {
				port = p
				return true, ""
			}
		}
		return false, "no GID index yet"
	})

	cfg := v1alpha1.RdmaConfig{}
	unlimited := v1alpha1.MemlockUnlimited
	cfg.Memlock = &unlimited
	cfg.Default()
	specDir := t.TempDir()
	w := cdi.NewWriter(cdi.Options{SpecDir: specDir, HookPath: "/usr/local/bin/rdma-dra-cdi-hook"})
	ids, err := w.Write(ctx, cdiClaimUID, []cdi.ClaimDevice{{
		Request: "rdma", Device: devicemodel.DeviceName(port.IBDev, port.Port), Port: *port, Config: cfg,
	}})
	if err != nil {
		t.Fatal(err)
	}

	// The container inherits runc's limits, which are the VM's: the hook must raise them.
	if got := memlockOf(t, os.Getpid()); got == "unlimited unlimited" {
		t.Fatalf("RLIMIT_MEMLOCK is unlimited before the container starts; the check below would prove nothing")
	}

	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), busybox, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "runc", "spec", "--bundle", bundle)
	spec := readOCISpec(t, filepath.Join(bundle, "config.json"))
	spec.Process.Terminal = false
	spec.Process.Args = []string{"/bin/busybox", "sh", "-c",
		"/bin/busybox ls -ln /dev/infiniband; /bin/busybox env; /bin/busybox cat /proc/self/limits"}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(specDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, l := range ids {
		all = append(all, l...)
	}
	if unresolved, err := cache.InjectDevices(spec, all...); err != nil {
		t.Fatalf("inject %v (unresolved %v): %v", all, unresolved, err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The VM's root is an initramfs, which pivot_root cannot leave: runc moves the root
	// and chroots instead.
	out := run(t, "runc", "--root", filepath.Join(t.TempDir(), "state"), "run", "--no-pivot", "--bundle", bundle, "cdi-test")
	t.Logf("the container printed:\n%s", out)

	var st unix.Stat_t
	if err := unix.Stat("/dev/infiniband/"+port.Verbs.Name, &st); err != nil {
		t.Fatal(err)
	}
	wantNode := fmt.Sprintf("%d, %d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	if !containsLine(out, func(l string) bool {
		return strings.HasPrefix(l, "c") && strings.Contains(l, wantNode) && strings.HasSuffix(l, " "+port.Verbs.Name)
	}) {
		t.Errorf("the container has no character device %s with the kernel's numbers %s", port.Verbs.Name, wantNode)
	}
	gid := fmt.Sprint(rdmaCoreGIDIndex(t, r.IBDev))
	for _, want := range []string{
		cdi.EnvNCCLHCA + "==" + r.IBDev + ":1", // NCCL's "=" prefix: exactly these HCAs
		cdi.EnvNCCLGIDIndex + "=" + gid,
		cdi.EnvUCXDevices + "=" + r.IBDev + ":1",
		cdi.EnvRDMADevices + "=" + r.IBDev,
	} {
		if !containsLine(out, func(l string) bool { return l == want }) {
			t.Errorf("the container's environment lacks %s", want)
		}
	}
	if !containsLine(out, func(l string) bool {
		f := strings.Fields(strings.TrimPrefix(l, "Max locked memory"))
		return strings.HasPrefix(l, "Max locked memory") && len(f) >= 2 && f[0] == "unlimited" && f[1] == "unlimited"
	}) {
		t.Error("the container's RLIMIT_MEMLOCK is not unlimited: the memlock hook did not run")
	}
}

// rdmaCoreGIDIndex is the GID index the documented rule gives on ibv_devinfo's table.
func rdmaCoreGIDIndex(t *testing.T, ibdev string) int {
	t.Helper()
	_, p := readDevinfo(t).port(ibdev, 1)
	if p == nil {
		t.Fatalf("%s not listed by ibv_devinfo", ibdev)
	}
	return rdmacore.RoCEv2GIDIndex(p.GIDs)
}

func readOCISpec(t *testing.T, name string) *oci.Spec {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var spec oci.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &spec
}

func containsLine(out string, match func(string) bool) bool {
	for _, l := range strings.Split(out, "\n") {
		if match(strings.TrimSpace(l)) {
			return true
		}
	}
	return false
}
