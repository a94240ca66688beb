package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// linkFile is a MapFS entry for a symbolic link to target.
func linkFile(target string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
}

func textFile(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s + "\n"), Mode: 0o444} }

// testTree is a small sysfs tree with the link shapes the kernel uses, plus hostile ones.
func testTree() fstest.MapFS {
	return fstest.MapFS{
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/vendor":                          textFile("0x15b3"),
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/driver":                          linkFile("../../../../bus/pci/drivers/mlx5_core"),
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0/fw_ver":        textFile("28.44.2524"),
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0/device":        linkFile("../../../0000:03:00.0"),
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0/ports/1/state": textFile("4: ACTIVE"),
		"class/infiniband/mlx5_0":   linkFile("../../devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0"),
		"class/infiniband/escape":   linkFile("../../../etc"),
		"class/infiniband/absolute": linkFile("/etc"),
		"class/infiniband/loop":     linkFile("loop"),
		"class/infiniband/ping":     linkFile("pong"),
		"class/infiniband/pong":     linkFile("ping"),
		"class/infiniband/dangling": linkFile("../../devices/nowhere"),
	}
}

func TestResolve(t *testing.T) {
	f := NewFS(testTree())
	tests := []struct {
		name    string
		want    string
		wantErr error
	}{
		{name: "class/infiniband/mlx5_0", want: "devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0"},
		{name: "class/infiniband/mlx5_0/device", want: "devices/pci0000:00/0000:00:01.0/0000:03:00.0"},
		{name: "class/infiniband/mlx5_0/device/vendor", want: "devices/pci0000:00/0000:00:01.0/0000:03:00.0/vendor"},
		{name: "class/infiniband/mlx5_0/ports/1/state", want: "devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0/ports/1/state"},
		{name: ".", want: "."},
		{name: "class/infiniband/escape", wantErr: ErrOutsideRoot},
		{name: "class/infiniband/escape/passwd", wantErr: ErrOutsideRoot},
		{name: "class/infiniband/absolute", wantErr: ErrOutsideRoot},
		{name: "class/infiniband/loop", wantErr: ErrTooManyLinks},
		{name: "class/infiniband/ping/x", wantErr: ErrTooManyLinks},
		{name: "class/infiniband/dangling", wantErr: fs.ErrNotExist},
		{name: "class/infiniband/missing", wantErr: fs.ErrNotExist},
		{name: "../etc", wantErr: fs.ErrInvalid},
		{name: "/etc", wantErr: fs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.Resolve(tt.name)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Resolve(%q) = %q, %v; want error %v", tt.name, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
			}
		})
	}
}

func TestReadHelpers(t *testing.T) {
	f := NewFS(testTree())
	if got, err := f.ReadString("class/infiniband/mlx5_0/fw_ver"); err != nil || got != "28.44.2524" {
		t.Errorf("ReadString(fw_ver) = %q, %v", got, err)
	}
	if got, err := Read(f, "class/infiniband/mlx5_0/ports/1/state", ParsePortState); err != nil || got != "ACTIVE" {
		t.Errorf("Read(state) = %q, %v", got, err)
	}
	_, err := Read(f, "class/infiniband/mlx5_0/fw_ver", ParsePortState)
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "class/infiniband/mlx5_0/fw_ver") || !strings.Contains(err.Error(), "28.44.2524") {
		t.Errorf("Read(fw_ver as state) error = %v, want it to name the file and the content", err)
	}
	names, err := f.ReadDirNames("class/infiniband")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names, ","), "absolute,dangling,escape,loop,mlx5_0,ping,pong"; got != want {
		t.Errorf("ReadDirNames = %s, want %s", got, want)
	}
	if got, err := f.LinkBase("class/infiniband/mlx5_0/device/driver"); err != nil || got != "mlx5_core" {
		t.Errorf("LinkBase(driver) = %q, %v", got, err)
	}
	if _, err := f.LinkBase("class/infiniband/mlx5_0/fw_ver"); err == nil {
		t.Error("LinkBase of a regular file succeeded")
	}
	for name, want := range map[string]bool{
		"class/infiniband/mlx5_0/device":   true,
		"class/infiniband/mlx5_0/physfn":   false,
		"class/infiniband/escape":          false,
		"class/infiniband/dangling":        false,
		"class/infiniband/mlx5_0/../x/../": false,
	} {
		if got := f.Exists(name); got != want {
			t.Errorf("Exists(%q) = %v, want %v", name, got, want)
		}
	}
	if !f.Lexists("class/infiniband/dangling") || f.Lexists("class/infiniband/none") {
		t.Error("Lexists does not tell a dangling link from a missing entry")
	}
}

// TestOpenDisk runs the resolver over a real directory, where the OS would follow an
// escaping link if this package did not refuse it.
func TestOpenDisk(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	mustSymlink(t, outside, filepath.Join(root, "abs"))
	mustSymlink(t, "../../"+filepath.Base(outside), filepath.Join(root, "rel"))
	if err := os.MkdirAll(filepath.Join(root, "devices/virtual/infiniband/rxe0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "devices/virtual/infiniband/rxe0/parent"), []byte("eth0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "class/infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "../../devices/virtual/infiniband/rxe0", filepath.Join(root, "class/infiniband/rxe0"))

	f, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.ReadString("class/infiniband/rxe0/parent"); err != nil || got != "eth0" {
		t.Errorf("ReadString(parent) = %q, %v", got, err)
	}
	// A final component that is a link takes the resolving path; one that leaves the
	// root is refused there too.
	mustSymlink(t, "parent", filepath.Join(root, "devices/virtual/infiniband/rxe0/alias"))
	mustSymlink(t, "../../../../../"+filepath.Base(outside)+"/secret", filepath.Join(root, "devices/virtual/infiniband/rxe0/leak"))
	if got, err := f.ReadString("class/infiniband/rxe0/alias"); err != nil || got != "eth0" {
		t.Errorf("ReadString(alias) = %q, %v", got, err)
	}
	if _, err := f.ReadString("class/infiniband/rxe0/leak"); !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("ReadString(leak) error = %v, want ErrOutsideRoot", err)
	}
	if _, err := f.ReadString("class/infiniband/rxe0/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadString(none) error = %v, want ErrNotExist", err)
	}
	for _, name := range []string{"abs/secret", "rel/secret"} {
		if _, err := f.ReadString(name); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("ReadString(%q) error = %v, want ErrOutsideRoot", name, err)
		}
	}

	if _, err := Open(filepath.Join(root, "missing")); err == nil {
		t.Error("Open of a missing root succeeded")
	}
	if _, err := Open(filepath.Join(root, "devices/virtual/infiniband/rxe0/parent")); err == nil {
		t.Error("Open of a regular file succeeded")
	}
}

func mustSymlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// TestReserveKeepsResults resolves the same names on an FS sized by an earlier scan's
// hint: the answers are the same, the hint is what the earlier scan cached, and a
// Reserve on an FS in use changes nothing.
func TestReserveKeepsResults(t *testing.T) {
	names := []string{
		"class/infiniband/mlx5_0/ports/1/state", "class/infiniband/mlx5_0/device/vendor",
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/vendor", "class/infiniband/dangling",
	}
	resolveAll := func(f *FS) []string {
		var out []string
		for _, n := range names {
			p, err := f.Resolve(n)
			out = append(out, p+" "+errString(err))
		}
		return out
	}
	first := NewFS(testTree())
	want := resolveAll(first)
	hint := first.Hint()
	if hint.Resolved == 0 || hint.Types == 0 {
		t.Fatalf("hint %+v after resolving %d names", hint, len(names))
	}
	second := NewFS(testTree())
	second.Reserve(hint)
	if got := resolveAll(second); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("with the hint:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := second.Hint(); got != hint {
		t.Errorf("second scan's hint %+v, want the first's %+v", got, hint)
	}
	second.Reserve(SizeHint{})
	if got := second.Hint(); got != hint {
		t.Errorf("Reserve on an FS in use dropped its caches: %+v, want %+v", got, hint)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
