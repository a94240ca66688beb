package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// TestHealthyNode: on a node that has everything every check passes, in the documented
// order.
func TestHealthyNode(t *testing.T) {
	f := newFixture(t, "dgx-h100", nil)
	_, ctx := ktesting.NewTestContext(t)
	results := Run(ctx, f.h)
	var names []string
	for _, r := range results {
		names = append(names, r.Check)
		if r.Status != OK {
			t.Errorf("%s: %s, want OK: %s (fix: %s)", r.Check, r.Status, r.Found, r.Fix)
		}
		if r.Fix != "" {
			t.Errorf("%s: OK with a fix %q", r.Check, r.Fix)
		}
	}
	want := []string{CheckKernelModules, CheckRDMACMModule, CheckRDMADevices, CheckCharDevices, CheckPortState,
		CheckRDMANetns, CheckRoCEGID, CheckGPUDirect, CheckRuntime, "containerd" + CheckCDISuffix, CheckCDISpecDirs,
		"containerd" + CheckNRISuffix, "containerd" + CheckMemlockSuffix, CheckIBDev2Netdev}
	if !slices.Equal(names, want) {
		t.Errorf("checks\n%v, want\n%v", names, want)
	}
}

// TestFindings breaks one thing per case and checks the status of the check that must
// notice, what it says it found, and that its fix names the right key, module or command.
func TestFindings(t *testing.T) {
	tests := []struct {
		name    string
		profile string // default dgx-h100
		node    func(*mocknode.Node)
		setup   func(*fixture)
		check   string
		want    Status
		found   []string
		fix     []string
	}{
		// Kernel modules.
		{name: "ib_uverbs missing", setup: func(f *fixture) { f.remove(f.sys("class/infiniband_verbs")) },
			check: CheckKernelModules, want: Fail, found: []string{"ib_uverbs not loaded"}, fix: []string{"modprobe -a ib_uverbs", "/etc/modules-load.d/"}},
		{name: "ib_uverbs as a module without its class yet", setup: func(f *fixture) {
			f.remove(f.sys("class/infiniband_verbs"))
			f.mkdir(f.sys("module/ib_uverbs"))
		}, check: CheckKernelModules, want: OK, found: []string{"ib_core, ib_uverbs loaded"}},
		{name: "ib_core missing", setup: func(f *fixture) {
			f.remove(f.sys("module/ib_core"))
			f.remove(f.sys("class/infiniband"))
		}, check: CheckKernelModules, want: Fail, found: []string{"ib_core not loaded"}, fix: []string{"modprobe -a ib_core", "mlx5_ib"}},
		{name: "rdma_ucm missing", setup: func(f *fixture) { f.remove(f.sys("class/misc/rdma_cm")) },
			check: CheckRDMACMModule, want: Warn, found: []string{"no /dev/infiniband/rdma_cm"}, fix: []string{"modprobe -a rdma_ucm", "modules-load.d"}},
		{name: "rdma_ucm loaded as a module", setup: func(f *fixture) {
			f.remove(f.sys("class/misc/rdma_cm"))
			f.mkdir(f.sys("module/rdma_ucm"))
		}, check: CheckRDMACMModule, want: OK},

		// RDMA devices.
		{name: "no RDMA devices", setup: func(f *fixture) {
			f.remove(f.sys("class/infiniband"))
			f.mkdir(f.sys("class/infiniband"))
		}, check: CheckRDMADevices, want: Fail, found: []string{"no RDMA device below", "publish nothing"}, fix: []string{"mlx5_ib", "irdma", "bnxt_re"}},
		{name: "mock node directory instead of its sys", setup: func(f *fixture) { f.h.SysfsRoot = f.dir },
			check: CheckRDMADevices, want: Fail, fix: []string{"--sysfs-root " + filepath.Join("DIR", "sys")}},
		{name: "sysfs root missing", setup: func(f *fixture) { f.h.SysfsRoot = f.path("nothing") },
			check: CheckRDMADevices, want: Fail, found: []string{"cannot read sysfs"}, fix: []string{"--sysfs-root"}},
		{name: "sysfs root missing skips the port checks", setup: func(f *fixture) { f.h.SysfsRoot = f.path("nothing") },
			check: CheckPortState, want: Skip, found: []string{"could not be read"}},

		// Character devices.
		{name: "uverbs node missing", setup: func(f *fixture) { delete(f.devs, filepath.Join(f.h.DevRoot, "infiniband/uverbs3")) },
			check: CheckCharDevices, want: Fail, found: []string{"mlx5_3: DEV/infiniband/uverbs3 (231:195) does not exist"}, fix: []string{"Let udev create the nodes below DEV/infiniband", "mknod PATH c MAJOR MINOR", "--dev-root"}},
		{name: "uverbs node with the wrong number", setup: func(f *fixture) {
			f.devs[filepath.Join(f.h.DevRoot, "infiniband/uverbs0")] = DevNode{Char: true, Major: 231, Minor: 200}
		}, check: CheckCharDevices, want: Fail, found: []string{"is 231:200, sysfs says 231:192"}, fix: []string{"Remove nodes with the wrong number", "mknod"}},
		{name: "uverbs node not a character device", setup: func(f *fixture) {
			f.devs[filepath.Join(f.h.DevRoot, "infiniband/uverbs0")] = DevNode{}
		}, check: CheckCharDevices, want: Fail, found: []string{"uverbs0 is not a character device (want 231:192)"}, fix: []string{"Remove what is there"}},
		{name: "device without uverbs in sysfs", setup: func(f *fixture) { f.remove(f.sys("class/infiniband_verbs/uverbs1")) },
			check: CheckCharDevices, want: Fail, found: []string{"mlx5_1 has no uverbs device"}, fix: []string{"ib_uverbs"}},
		{name: "rdma_cm node missing", setup: func(f *fixture) { delete(f.devs, filepath.Join(f.h.DevRoot, "infiniband/rdma_cm")) },
			check: CheckCharDevices, want: Warn, found: []string{"rdma_cm: DEV/infiniband/rdma_cm (10:58) does not exist"}, fix: []string{"Let udev create"}},
		{name: "rdma_cm without rdma_ucm", setup: func(f *fixture) { f.remove(f.sys("class/misc/rdma_cm")) },
			check: CheckCharDevices, want: Warn, found: []string{"rdma_cm: no class/misc/rdma_cm"}, fix: []string{"Load rdma_ucm"}},

		// Port states.
		{name: "disabled port", profile: "disabled-port", check: CheckPortState, want: Warn,
			found: []string{"1 of 4 ports not ACTIVE: mlx5_2/1 DOWN (Disabled)", "rdma.dra.io/port-not-active"}, fix: []string{"ibportstate"}},
		{name: "port without subnet manager", node: func(n *mocknode.Node) {
			n.RDMADevices[0].Ports[0].State = "INIT"
		}, check: CheckPortState, want: Warn, found: []string{"mlx5_0/1 INIT (LinkUp)"}, fix: []string{"subnet manager", "sminfo"}},
		{name: "RoCE port down", node: func(n *mocknode.Node) {
			p := &n.RDMADevices[9].Ports[0]
			p.State, p.PhysState = "DOWN", "Polling"
		}, check: CheckPortState, want: Warn, found: []string{"mlx5_9/1 DOWN (Polling)"}, fix: []string{"ip link set <netdev> up"}},

		// RDMA netns mode.
		{name: "exclusive netns mode", node: func(n *mocknode.Node) { n.NetnsMode = "N" },
			check: CheckRDMANetns, want: OK, found: []string{"exclusive", "whole ports only", "NRI network attachment"}},
		{name: "netns mode unreadable", setup: func(f *fixture) { f.remove(f.sys("module/ib_core/parameters")) },
			check: CheckRDMANetns, want: Warn, found: []string{"unknown"}, fix: []string{"rdma system show netns"}},

		// RoCE GIDs.
		{name: "RoCE port with link-local GIDs only", profile: "intel-e810", check: CheckRoCEGID, want: Warn,
			found: []string{"1 of 2 RoCE ports", "irdma1/1 (enp81s0f1): ", "link-local only", "NCCL_IB_GID_INDEX will not be set"},
			fix:   []string{"Give enp81s0f1 an IPv4 or global IPv6 address", "ip addr add"}},
		{name: "InfiniBand only", profile: "disabled-port", check: CheckRoCEGID, want: Skip, found: []string{"no RoCE"}},

		// GPUDirect RDMA.
		{name: "proprietary NVIDIA driver with nvidia_peermem", check: CheckGPUDirect, want: OK, found: []string{"gpudirect=peermem on 10 ports"}},
		{name: "NVIDIA driver without nvidia_peermem", setup: func(f *fixture) { f.remove(f.sys("module/nvidia_peermem")) },
			check: CheckGPUDirect, want: Warn, found: []string{"10 of 10 ports without GPUDirect RDMA", "mlx5_0/1: proprietary NVIDIA kernel modules (taint PO)"},
			fix: []string{"modprobe -a nvidia_peermem", "open kernel modules"}},
		{name: "open kernel modules", setup: func(f *fixture) {
			f.remove(f.sys("module/nvidia_peermem"))
			f.writeFile(f.sys("module/nvidia/taint"), "OE\n")
		}, check: CheckGPUDirect, want: OK, found: []string{"gpudirect=dmabuf on 10 ports"}},
		{name: "open kernel modules and nvidia_peermem", setup: func(f *fixture) { f.writeFile(f.sys("module/nvidia/taint"), "O\n") },
			check: CheckGPUDirect, want: OK, found: []string{"gpudirect=dmabuf on 10 ports", "nvidia_peermem is loaded too"}},
		{name: "NVIDIA taint unreadable", setup: func(f *fixture) {
			f.remove(f.sys("module/nvidia_peermem"))
			f.writeFile(f.sys("module/nvidia/taint"), "P O\n")
		}, check: CheckGPUDirect, want: Warn, found: []string{"taint cannot be read", "count as proprietary"}, fix: []string{"nvidia_peermem"}},
		{name: "ports of a driver not known to register GPU memory", profile: "intel-e810", check: CheckGPUDirect, want: Warn,
			found: []string{"2 of 2 ports", "irdma0/1: driver ice is not known to register GPU memory"}, fix: []string{"Ports of ice", "NCCL_DEBUG=INFO"}},
		{name: "soft-RoCE only", profile: "soft-roce", check: CheckGPUDirect, want: Skip, found: []string{"virtual device"}},
		{name: "no NVIDIA driver", setup: func(f *fixture) { f.remove(f.sys("module/nvidia")) },
			check: CheckGPUDirect, want: Skip, found: []string{"no NVIDIA driver loaded"}},

		// The container runtime.
		{name: "no runtime at all", setup: func(f *fixture) {
			f.remove(f.h.ProcRoot)
			f.remove(f.h.ContainerdConfig)
		}, check: CheckRuntime, want: Skip, found: []string{"neither containerd nor CRI-O found"}},
		{name: "config with a syntax error", setup: func(f *fixture) { f.writeFile(f.h.ContainerdConfig, "version = 3\n[plugins\n") },
			check: CheckRuntime, want: Fail, found: []string{"parse containerd config"}, fix: []string{"syntax"}},
		{name: "config with a syntax error skips cdi", setup: func(f *fixture) { f.writeFile(f.h.ContainerdConfig, "version = 3\n[plugins\n") },
			check: "containerd-cdi", want: Skip, found: []string{"config unreadable"}},
		{name: "runtime runs with another config", setup: func(f *fixture) {
			f.process(containerdPID, "containerd", []string{"/usr/bin/containerd", "--config=/etc/k8s/containerd.toml"}, "unlimited", "unlimited")
		}, check: CheckRuntime, want: Warn, found: []string{"runs with --config /etc/k8s/containerd.toml"}, fix: []string{"--containerd-config /etc/k8s/containerd.toml"}},

		// containerd CDI.
		{name: "containerd 1.7 without enable_cdi", setup: func(f *fixture) {
			f.exe = Executable{Module: "github.com/containerd/containerd", Version: "v1.7.27"}
			f.writeFile(f.h.ContainerdConfig, "version = 2\n")
		}, check: "containerd-cdi", want: Fail, found: []string{"CDI off (the default of containerd 1.7)"},
			fix: []string{`enable_cdi = true in [plugins."io.containerd.grpc.v1.cri"]`, "systemctl restart containerd"}},
		{name: "containerd 1.7 with enable_cdi", setup: func(f *fixture) {
			f.exe = Executable{Module: "github.com/containerd/containerd", Version: "v1.7.27"}
			f.writeFile(f.h.ContainerdConfig, fmt.Sprintf("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\ncdi_spec_dirs = [%q, %q]\n",
				f.h.CDIDirs[0], f.h.CDIDirs[1]))
		}, check: "containerd-cdi", want: OK, found: []string{"enable_cdi = true in"}},
		{name: "containerd 1.6", setup: func(f *fixture) { f.exe = Executable{Module: "github.com/containerd/containerd", Version: "v1.6.36"} },
			check: "containerd-cdi", want: Fail, found: []string{"no CDI support"}, fix: []string{"Upgrade"}},
		{name: "version 3 config turning CDI off", setup: func(f *fixture) {
			f.writeFile(f.h.ContainerdConfig, "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = false\n")
		}, check: "containerd-cdi", want: Fail, found: []string{"CDI off (enable_cdi = false in"},
			fix: []string{`enable_cdi = true in [plugins."io.containerd.cri.v1.runtime"]`}},
		{name: "containerd 2.4 ignores enable_cdi", setup: func(f *fixture) {
			f.exe.Version = "v2.4.2"
			f.writeFile(f.h.ContainerdConfig, fmt.Sprintf("version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = false\ncdi_spec_dirs = [%q, %q]\n",
				f.h.CDIDirs[0], f.h.CDIDirs[1]))
		}, check: "containerd-cdi", want: OK, found: []string{"always on in containerd 2.4", "is ignored"}},
		{name: "version 2 config and an unknown binary", setup: func(f *fixture) {
			f.exeErr = fmt.Errorf("not a Go binary")
			f.writeFile(f.h.ContainerdConfig, "version = 2\n")
		}, check: "containerd-cdi", want: Warn, found: []string{"neither the config (version 2) nor the running binary tells"},
			fix: []string{`enable_cdi = true in [plugins."io.containerd.grpc.v1.cri"]`}},
		{name: "no config file and an unknown binary", setup: func(f *fixture) {
			f.exeErr = fmt.Errorf("not a Go binary")
			f.remove(f.h.ContainerdConfig)
		}, check: "containerd-cdi", want: Warn, found: []string{"there is no config file, and the running binary does not tell"}, fix: []string{"enable_cdi = true"}},
		{name: "version 3 config and an unknown binary", setup: func(f *fixture) { f.exeErr = fmt.Errorf("not a Go binary") },
			check: "containerd-cdi", want: OK, found: []string{"which version 3 configs are for"}},
		{name: "containerd scans other directories", setup: func(f *fixture) { f.writeFile(f.h.ContainerdConfig, "version = 3\n") },
			check: "containerd-cdi", want: Fail, found: []string{"scans /etc/cdi, /var/run/cdi (default)", "not " + filepath.Join("DIR", "etc/cdi")},
			fix: []string{"Add " + filepath.Join("DIR", "etc/cdi"), `cdi_spec_dirs in [plugins."io.containerd.cri.v1.runtime"]`, "cdiDir"}},
		{name: "/var/run and /run are one", setup: func(f *fixture) {
			f.h.CDIDirs = []string{"/run/cdi"}
			f.writeFile(f.h.ContainerdConfig, "version = 3\n")
		}, check: "containerd-cdi", want: OK},
		{name: "an imported file turns CDI off", setup: func(f *fixture) {
			main := fmt.Sprintf("version = 3\nimports = [\"conf.d/*.toml\"]\n[plugins.'io.containerd.cri.v1.runtime']\ncdi_spec_dirs = [%q, %q]\n", f.h.CDIDirs[0], f.h.CDIDirs[1])
			f.writeFile(f.h.ContainerdConfig, main)
			f.writeFile(filepath.Join(filepath.Dir(f.h.ContainerdConfig), "conf.d/99-gpu.toml"), "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = false\n")
		}, check: "containerd-cdi", want: Fail, found: []string{"conf.d/99-gpu.toml"}},

		// CRI-O CDI.
		{name: "CRI-O scanning other directories", setup: func(f *fixture) {
			f.crio("v1.34.1")
			f.writeFile(f.h.CRIOConfig+".d/10-cdi.conf", "[crio.runtime]\ncdi_spec_dirs = [\"/opt/cdi\"]\n")
		}, check: "crio-cdi", want: Fail, found: []string{"scans /opt/cdi (in " + filepath.Join("DIR", "etc/crio/crio.conf.d/10-cdi.conf")},
			fix: []string{"cdi_spec_dirs in [crio.runtime]", "--cdi-spec-dirs"}},
		{name: "CRI-O with defaults", setup: func(f *fixture) { f.crio("v1.34.1") },
			check: "crio-cdi", want: OK, found: []string{"always on in CRI-O"}},

		// CDI spec directories.
		{name: "spec directory missing", setup: func(f *fixture) { f.remove(f.h.CDIDirs[0]) },
			check: CheckCDISpecDirs, want: Warn, found: []string{"etc/cdi does not exist"}, fix: []string{"mkdir -p"}},
		{name: "spec directory a file", setup: func(f *fixture) {
			f.remove(f.h.CDIDirs[1])
			f.writeFile(f.h.CDIDirs[1], "")
		}, check: CheckCDISpecDirs, want: Fail, found: []string{"var/run/cdi is not a directory"}},
		{name: "spec directory read-only", setup: func(f *fixture) { f.readOnly[f.h.CDIDirs[0]] = true },
			check: CheckCDISpecDirs, want: Fail, found: []string{"is not writable: read-only file system"}, fix: []string{"writable"}},

		// containerd NRI.
		{name: "containerd NRI disabled", setup: func(f *fixture) {
			f.writeFile(f.h.ContainerdConfig, f.containerdWith("[plugins.'io.containerd.nri.v1.nri']\ndisable = true\n"))
		}, check: "containerd-nri", want: Warn, found: []string{"NRI off (disable = true in", "network attachment"},
			fix: []string{`disable = false in [plugins."io.containerd.nri.v1.nri"]`}},
		{name: "containerd NRI disabled in exclusive netns mode", node: func(n *mocknode.Node) { n.NetnsMode = "N" }, setup: func(f *fixture) {
			f.writeFile(f.h.ContainerdConfig, f.containerdWith("[plugins.'io.containerd.nri.v1.nri']\ndisable = true\n"))
		}, check: "containerd-nri", want: Fail, found: []string{"exclusive, so every claim fails"}, fix: []string{"disable = false"}},
		{name: "containerd 1.7 NRI default", setup: func(f *fixture) {
			f.exe = Executable{Module: "github.com/containerd/containerd", Version: "v1.7.27"}
		}, check: "containerd-nri", want: Warn, found: []string{"NRI off (the default of containerd 1.7)"}, fix: []string{"disable = false"}},
		{name: "containerd refusing plugin connections", setup: func(f *fixture) {
			f.writeFile(f.h.ContainerdConfig, f.containerdWith("[plugins.'io.containerd.nri.v1.nri']\ndisable_connections = true\n"))
		}, check: "containerd-nri", want: Warn, found: []string{"refuses plugins"}, fix: []string{"disable_connections = false"}},
		{name: "containerd NRI socket elsewhere", setup: func(f *fixture) {
			f.writeFile(f.h.ContainerdConfig, f.containerdWith("[plugins.'io.containerd.nri.v1.nri']\nsocket_path = \"/nonexistent/nri.sock\"\n"))
		}, check: "containerd-nri", want: Warn, found: []string{"no socket at /nonexistent/nri.sock"}, fix: []string{"networkAttachment.nriSocket"}},
		{name: "containerd NRI socket named in the config", setup: func(f *fixture) {
			sock := f.socket()
			f.h.NRISocket = "/nonexistent/default.sock"
			f.writeFile(f.h.ContainerdConfig, f.containerdWith(fmt.Sprintf("[plugins.'io.containerd.nri.v1.nri']\nsocket_path = %q\n", sock)))
		}, check: "containerd-nri", want: OK, found: []string{"NRI on (the default of containerd 2.x), socket"}},

		// CRI-O NRI.
		{name: "CRI-O before 1.30 NRI default", setup: func(f *fixture) { f.crio("v1.29.6") },
			check: "crio-nri", want: Warn, found: []string{"NRI off (the default of CRI-O before 1.30)"}, fix: []string{"enable_nri = true in [crio.nri]", "crio.conf.d"}},
		{name: "CRI-O 1.30 NRI default", setup: func(f *fixture) { f.crio("v1.30.0") },
			check: "crio-nri", want: OK, found: []string{"the default of CRI-O 1.30 and later"}},
		{name: "CRI-O of unknown version", setup: func(f *fixture) { f.crio("(devel)") },
			check: "crio-nri", want: Warn, found: []string{"does not tell"}, fix: []string{"enable_nri = true"}},
		{name: "CRI-O refusing plugin connections", setup: func(f *fixture) {
			f.crio("v1.34.1")
			f.writeFile(f.h.CRIOConfig+".d/20-nri.conf", "[crio.nri]\nnri_disable_connections = true\n")
		}, check: "crio-nri", want: Warn, found: []string{"refuses plugins"}, fix: []string{"nri_disable_connections = false in [crio.nri]"}},

		// memlock.
		{name: "containerd with 8 MiB", setup: func(f *fixture) {
			f.process(containerdPID, "containerd", []string{"/usr/bin/containerd"}, "8388608", "8388608")
		}, check: "containerd-memlock", want: Warn, found: []string{"containerd (pid 4242): max locked memory 8 MiB (hard 8 MiB)"},
			fix: []string{"RdmaConfig memlock: unlimited", "rdma-dra-cdi-hook", "LimitMEMLOCK=infinity", "containerd.service"}},
		{name: "containerd not running", setup: func(f *fixture) { f.remove(f.h.ProcRoot) },
			check: "containerd-memlock", want: Skip, found: []string{"not running"}},
		{name: "CRI-O default_ulimits unlimited", setup: func(f *fixture) {
			f.crio("v1.34.1")
			f.process(777, "crio", []string{"/usr/bin/crio"}, "65536", "65536")
			f.writeFile(f.h.CRIOConfig+".d/30-ulimits.conf", "[crio.runtime]\ndefault_ulimits = [\"nofile=1024:2048\", \"memlock=-1:-1\"]\n")
		}, check: "crio-memlock", want: OK, found: []string{"default_ulimits in", "unlimited"}},
		{name: "CRI-O inheriting 64 KiB", setup: func(f *fixture) {
			f.crio("v1.34.1")
			f.process(777, "crio", []string{"/usr/bin/crio"}, "65536", "65536")
		}, check: "crio-memlock", want: Warn, found: []string{"64 KiB"}, fix: []string{`default_ulimits = ["memlock=-1:-1"]`, "crio.service"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			profile := tt.profile
			if profile == "" {
				profile = "dgx-h100"
			}
			f := newFixture(t, profile, tt.node)
			if tt.setup != nil {
				tt.setup(f)
			}
			r, ok := f.run()[tt.check]
			if !ok {
				t.Fatalf("no result of %s", tt.check)
			}
			if r.Status != tt.want {
				t.Errorf("status %s, want %s\nfound: %s\nfix: %s", r.Status, tt.want, r.Found, r.Fix)
			}
			// DIR in an expectation stands for the fixture's directory, DEV for its /dev.
			expand := func(s string) string {
				return strings.ReplaceAll(strings.ReplaceAll(s, "DIR", f.dir), "DEV", f.h.DevRoot)
			}
			for _, s := range tt.found {
				if !strings.Contains(r.Found, expand(s)) {
					t.Errorf("found lacks %q:\n%s", expand(s), r.Found)
				}
			}
			for _, s := range tt.fix {
				if !strings.Contains(r.Fix, expand(s)) {
					t.Errorf("fix lacks %q:\n%s", expand(s), r.Fix)
				}
			}
			if (r.Status == Warn || r.Status == Fail) != (r.Fix != "") {
				t.Errorf("%s with fix %q: WARN and FAIL need a fix, nothing else has one", r.Status, r.Fix)
			}
			if r.Fix != "" && len(strings.Fields(r.Fix)) < 3 {
				t.Errorf("fix %q says nothing", r.Fix)
			}
		})
	}
}

// containerdWith is the fixture's containerd config with more TOML after it.
func (f *fixture) containerdWith(more string) string {
	return fmt.Sprintf("version = 3\n[plugins.'io.containerd.cri.v1.runtime']\ncdi_spec_dirs = [%q, %q]\n%s", f.h.CDIDirs[0], f.h.CDIDirs[1], more)
}

// TestRealDevNodes runs the char-devices check with the real stat: a regular file where a
// character device belongs fails, and with mknod (root only) real devices pass.
func TestRealDevNodes(t *testing.T) {
	f := newFixture(t, "soft-roce", nil)
	f.h.StatDev = nil
	f.writeFile(filepath.Join(f.h.DevRoot, "infiniband/uverbs0"), "")
	r := f.run()[CheckCharDevices]
	if r.Status != Fail || !strings.Contains(r.Found, "uverbs0 is not a character device") {
		t.Errorf("regular file: %s: %s", r.Status, r.Found)
	}
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	f.remove(f.h.DevRoot)
	if err := f.node.MakeDevNodes(f.h.DevRoot); err != nil {
		t.Skipf("cannot mknod here: %v", err)
	}
	if r := f.run()[CheckCharDevices]; r.Status != OK {
		t.Errorf("real devices: %s: %s", r.Status, r.Found)
	}
}

func TestIBDev2Netdev(t *testing.T) {
	f := newFixture(t, "disabled-port", nil)
	r := f.run()[CheckIBDev2Netdev]
	want := []string{"mlx5_0 port 1 ==> ibp24s0 (Up)", "mlx5_1 port 1 ==> ibp64s0 (Up)", "mlx5_2 port 1 ==> ibp154s0 (Down)", "mlx5_3 port 1 ==> ibp192s0 (Up)"}
	if r.Status != OK || !slices.Equal(r.Details, want) {
		t.Errorf("%s %s:\n%s\nwant\n%s", r.Status, r.Found, strings.Join(r.Details, "\n"), strings.Join(want, "\n"))
	}
}
