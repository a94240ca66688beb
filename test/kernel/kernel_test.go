//go:build e2ekernel

// Package kernel runs the real-kernel test tier (make e2e-kernel, docs/kernel-tests.md):
// it builds a VM from the pinned Debian packages of packages.lock with the project's
// static binaries and the tests of ./invm inside, boots it under QEMU, and reports each
// test that ran in the VM as a subtest here.
package kernel

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/kernel/vm"
)

// Environment of make e2e-kernel.
const (
	// envCache is the cache directory (downloads, extracted packages, image); default
	// _output/kernel-vm of the repository.
	envCache = "KERNEL_VM_CACHE"
	// envRun selects tests in the VM, a -test.run expression.
	envRun = "KERNEL_RUN"
	// envTimeout bounds the boot and the tests in the VM, a duration; default 10m.
	envTimeout = "KERNEL_VM_TIMEOUT"
	// envAccel is QEMU's accelerator, tcg (default) or kvm.
	envAccel = "KERNEL_VM_ACCEL"
)

// modules are loaded at boot. crc32_generic comes first: rdma_rxe asks the crypto API
// for crc32 and fails to load without an implementation ("failed to init crc32
// algorithm"), which is not a module dependency the kernel records.
var modules = []string{"crc32_generic", "rdma_rxe", "ib_uverbs", "ib_umad", "rdma_ucm", "veth", "macvlan"}

// programs are the dynamically linked tools the tests compare the driver with, and the
// verbs provider libibverbs loads for rxe devices.
var programs = []string{
	"bin/ip",
	"usr/bin/rdma",
	"usr/bin/ibv_devinfo",
	"usr/bin/ibv_rc_pingpong",
	"usr/sbin/runc",
	"usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
}

// initScript is the VM's /init: mounts, modules, the tests on the second serial port,
// then power off. %s is the test binary's extra arguments.
const initScript = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /run /tmp /bb /var
/bin/busybox --install -s /bb
export PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin:/bb
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
# Lets every test of kernel.test run: outside the VM it runs only the read-only one.
export RDMA_DRA_KERNEL_VM=1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ln -s /run /var/run
mkdir -p /run/netns
ip link set lo up
for m in $(cat /etc/modules.load); do
  insmod /lib/modules/$m || echo "vm: insmod $m failed"
done
echo "vm: kernel $(uname -r), modules loaded"
cd /tmp
/usr/local/bin/kernel.test -test.v -test.timeout=%s %s > /dev/ttyS1 2>&1
status=$?
echo "%s" > /dev/ttyS1
sync
poweroff -f
`

func TestKernelVM(t *testing.T) {
	ctx := t.Context()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv(envCache)
	if cache == "" {
		cache = filepath.Join(repo, "_output", "kernel-vm")
	}
	timeout := 10 * time.Minute
	if s := os.Getenv(envTimeout); s != "" {
		if timeout, err = time.ParseDuration(s); err != nil {
			t.Fatalf("%s=%q: %v", envTimeout, s, err)
		}
	}
	logf := func(format string, args ...any) { t.Logf(format, args...) }

	start := time.Now()
	lockFile := filepath.Join(repo, "test", "kernel", "packages.lock")
	data, err := os.ReadFile(lockFile)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := vm.ParseLock(lockFile, data)
	if err != nil {
		t.Fatal(err)
	}
	debs, err := vm.Fetch(ctx, cache, pkgs, logf)
	if err != nil {
		t.Fatal(err)
	}
	root, err := vm.Extract(ctx, cache, vm.LockKey(pkgs), debs)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(cache, "bin")
	goBuild(t, ctx, repo, "build", "-trimpath", "-ldflags=-s -w", "-o", bin+"/", "./cmd/rdma-dra", "./cmd/rdma-dra-cdi-hook")
	goBuild(t, ctx, filepath.Join(repo, "test"), "test", "-c", "-tags", "kernelvm", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(bin, "kernel.test"), "./kernel/invm")

	var extra []string
	if run := os.Getenv(envRun); run != "" {
		if strings.ContainsAny(run, " '\"\\$`") {
			t.Fatalf("%s=%q: a -test.run expression without spaces, quotes, $ or backslashes, please", envRun, run)
		}
		extra = append(extra, "-test.run="+run)
	}
	inVM := timeout - time.Minute
	spec := vm.ImageSpec{
		Root:     root,
		Programs: programs,
		Static:   []string{"bin/busybox"},
		Files:    []string{"etc/libibverbs.d/rxe.driver"},
		Modules:  modules,
		Host: map[string]string{
			"/usr/local/bin/rdma-dra":          filepath.Join(bin, "rdma-dra"),
			"/usr/local/bin/rdma-dra-cdi-hook": filepath.Join(bin, "rdma-dra-cdi-hook"),
			"/usr/local/bin/kernel.test":       filepath.Join(bin, "kernel.test"),
		},
		Init: fmt.Sprintf(initScript, inVM, strings.Join(extra, " "), vm.ExitMarker("$status")),
	}
	img, err := vm.Build(ctx, spec, filepath.Join(cache, "image"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image ready in %s: kernel %s, modules %s", time.Since(start).Round(time.Millisecond), img.Release, strings.Join(img.LoadOrder, " "))

	run, err := vm.Boot(ctx, img, vm.BootOptions{Dir: filepath.Join(cache, "image"), Timeout: timeout, Accel: os.Getenv(envAccel)})
	var results []vm.Result
	if run != nil {
		results = run.Results
	}
	for _, r := range results {
		t.Run(r.Name, func(t *testing.T) {
			t.Log("\n" + r.Output)
			switch r.Outcome {
			case "FAIL":
				t.Fail()
			case "SKIP":
				t.Skip("skipped in the VM")
			}
		})
	}
	if run != nil {
		passed, failed := 0, 0
		for _, r := range run.Results {
			switch r.Outcome {
			case "PASS":
				passed++
			case "FAIL":
				failed++
			}
		}
		t.Logf("VM (%s) ran %d tests in %s: %d passed, %d failed; logs in %s and %s",
			run.Accel, len(run.Results), run.Elapsed.Round(time.Millisecond), passed, failed, run.Console, run.ResultsLog)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Results) == 0 {
		t.Fatal("no test ran in the VM")
	}
}

// goBuild runs the go command in dir with cgo off, so that the binaries are static and
// independent of the VM's pinned libc, and stripped, so that the initramfs stays small.
func goBuild(t *testing.T, ctx context.Context, dir string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
