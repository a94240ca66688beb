package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// fixture is a fake node in a temporary directory: a mock node's sysfs tree (written by
// pkg/mocknode), a fake /dev, /proc and runtime configs around it, and the Host that
// points at all of it. newFixture makes a node on which every check passes; a test then
// breaks one thing.
type fixture struct {
	t    *testing.T
	dir  string
	node *mocknode.Node
	h    Host
	// devs is the fake /dev that StatDev reads, by path.
	devs map[string]DevNode
	// exe is what the runtime's executable says; exeErr fails the read instead.
	exe    Executable
	exeErr error
	// readOnly are the directories Writable refuses.
	readOnly map[string]bool
}

const containerdPID = 4242

// newFixture writes the mock profile (after edit, when given) and a healthy node around
// it: containerd 2.x running with an unlimited memlock limit, a version 3 config that
// scans the fixture's CDI directories and names an NRI socket that exists, and the
// NVIDIA's proprietary modules with nvidia_peermem.
func newFixture(t *testing.T, profile string, edit func(*mocknode.Node)) *fixture {
	t.Helper()
	p, err := mocknode.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: t.TempDir(), node: p.Node(), devs: map[string]DevNode{}, readOnly: map[string]bool{},
		exe: Executable{Module: "github.com/containerd/containerd/v2", Version: "v2.1.4"}}
	if edit != nil {
		edit(f.node)
	}
	if err := f.node.Write(f.dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cdiDirs := []string{f.path("etc/cdi"), f.path("var/run/cdi")}
	f.h = Host{
		SysfsRoot:        f.path(mocknode.SysDir),
		DevRoot:          f.path("dev"),
		ProcRoot:         f.path("proc"),
		ContainerdConfig: f.path("etc/containerd/config.toml"),
		CRIOConfig:       f.path("etc/crio/crio.conf"),
		CDIDirs:          cdiDirs,
		NRISocket:        f.socket(),
		StatDev: func(p string) (DevNode, error) {
			if n, ok := f.devs[p]; ok {
				return n, nil
			}
			return DevNode{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
		},
		Executable: func(string) (Executable, error) { return f.exe, f.exeErr },
		Writable: func(d string) error {
			if f.readOnly[d] {
				return errors.New("read-only file system")
			}
			return nil
		},
	}
	for _, c := range f.node.CharDevs() {
		f.devs[filepath.Join(f.h.DevRoot, c.DevPath())] = DevNode{Char: true, Major: c.Major, Minor: c.Minor}
	}
	for _, d := range cdiDirs {
		f.mkdir(d)
	}
	f.writeFile(f.sys("module/nvidia/taint"), "PO\n")
	f.mkdir(f.sys("module/nvidia_peermem"))
	f.process(containerdPID, "containerd", []string{"/usr/bin/containerd"}, "unlimited", "unlimited")
	f.writeFile(f.h.ContainerdConfig, fmt.Sprintf("version = 3\n\n[plugins.'io.containerd.cri.v1.runtime']\n  cdi_spec_dirs = [%q, %q]\n",
		cdiDirs[0], cdiDirs[1]))
	return f
}

func (f *fixture) path(rel string) string { return filepath.Join(f.dir, filepath.FromSlash(rel)) }

func (f *fixture) sys(rel string) string {
	return filepath.Join(f.h.SysfsRoot, filepath.FromSlash(rel))
}

func (f *fixture) mkdir(p string) {
	f.t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) writeFile(p, content string) {
	f.t.Helper()
	f.mkdir(filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) remove(p string) {
	f.t.Helper()
	if err := os.RemoveAll(p); err != nil {
		f.t.Fatal(err)
	}
}

// socket creates a listening unix socket for the test's lifetime and returns its path.
// Its directory is short: a socket path has room for about 100 bytes.
func (f *fixture) socket() string {
	f.t.Helper()
	dir, err := os.MkdirTemp("", "nri")
	if err != nil {
		f.t.Fatal(err)
	}
	p := filepath.Join(dir, "nri.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { l.Close(); os.RemoveAll(dir) })
	return p
}

// process writes /proc/<pid>/{comm,cmdline,limits} of a fake process.
func (f *fixture) process(pid int, comm string, args []string, soft, hard string) {
	dir := filepath.Join(f.h.ProcRoot, strconv.Itoa(pid))
	f.writeFile(filepath.Join(dir, "comm"), comm+"\n")
	f.writeFile(filepath.Join(dir, "cmdline"), strings.Join(args, "\x00")+"\x00")
	f.writeFile(filepath.Join(dir, "limits"), fmt.Sprintf(
		"Limit                     Soft Limit           Hard Limit           Units     \n"+
			"Max cpu time              unlimited            unlimited            seconds   \n"+
			"Max locked memory         %-20s %-20s bytes     \n"+
			"Max open files            1048576              1048576              files     \n", soft, hard))
}

// crio replaces containerd by CRI-O (running, the given version) with a config that scans
// the fixture's CDI directories.
func (f *fixture) crio(version string) {
	f.remove(f.h.ProcRoot)
	f.remove(filepath.Dir(f.h.ContainerdConfig))
	f.process(777, "crio", []string{"/usr/bin/crio"}, "unlimited", "unlimited")
	f.exe = Executable{Module: "github.com/cri-o/cri-o", Version: version}
	f.writeFile(f.h.CRIOConfig, fmt.Sprintf("[crio.runtime]\ncdi_spec_dirs = [%q, %q]\n", f.h.CDIDirs[0], f.h.CDIDirs[1]))
}

// run runs the checks and returns the results by check name.
func (f *fixture) run() map[string]Result {
	f.t.Helper()
	out := map[string]Result{}
	_, ctx := ktesting.NewTestContext(f.t)
	for _, r := range Run(ctx, f.h) {
		if _, dup := out[r.Check]; dup {
			f.t.Errorf("check %s reported twice", r.Check)
		}
		out[r.Check] = r
	}
	return out
}
