package mocknode

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCharDevNumbers(t *testing.T) {
	tests := []struct {
		profile string
		want    map[string]string // name -> "major:minor ibdev port"
		absent  []string
		count   int
	}{
		{"dgx-h100", map[string]string{
			"rdma_cm": "10:58  0", "uverbs0": "231:192 mlx5_0 0", "uverbs9": "231:201 mlx5_9 0",
			"umad9": "231:9 mlx5_9 1", "issm9": "231:73 mlx5_9 1",
		}, []string{"uverbs10", "umad10"}, 1 + 3*10},
		{"vpi-dual-port", map[string]string{
			"uverbs0": "231:192 mlx4_0 0", "umad0": "231:0 mlx4_0 1", "umad1": "231:1 mlx4_0 2", "issm1": "231:65 mlx4_0 2",
		}, []string{"uverbs1"}, 1 + 1 + 2*2},
		{"intel-e810", map[string]string{"uverbs1": "231:193 irdma1 0"}, []string{"umad0", "issm0"}, 1 + 2},
		{"soft-roce", map[string]string{"uverbs0": "231:192 rxe0 0", "umad0": "231:0 rxe0 1"}, nil, 1 + 3},
		// Past the fixed ranges the kernel hands out dynamic device numbers.
		{"large", map[string]string{
			"uverbs31": "231:223 mlx5_31 0", "uverbs32": "510:0 mlx5_32 0", "uverbs319": "510:287 mlx5_319 0",
			"umad63": "231:63 mlx5_63 1", "umad64": "509:0 mlx5_64 1", "issm63": "231:127 mlx5_63 1", "issm64": "509:8128 mlx5_64 1",
		}, nil, 1 + 3*320},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			p, _ := Lookup(tc.profile)
			devs := p.Node().CharDevs()
			if len(devs) != tc.count {
				t.Errorf("%d character devices, want %d", len(devs), tc.count)
			}
			got := map[string]string{}
			for _, c := range devs {
				if _, dup := got[c.Name]; dup {
					t.Errorf("%s listed twice", c.Name)
				}
				got[c.Name] = strconv.Itoa(int(c.Major)) + ":" + strconv.Itoa(int(c.Minor)) + " " + c.IBDev + " " + strconv.Itoa(c.Port)
			}
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s = %q, want %q", name, got[name], want)
				}
			}
			for _, name := range tc.absent {
				if v, ok := got[name]; ok {
					t.Errorf("%s = %q, want none", name, v)
				}
			}
		})
	}
}

func TestWriteCharDevs(t *testing.T) {
	var buf bytes.Buffer
	p, _ := Lookup("large")
	if err := p.Node().WriteCharDevs(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if lines[0] != "/dev/infiniband/rdma_cm c 10 58" || lines[1] != "/dev/infiniband/uverbs0 c 231 192" {
		t.Errorf("first lines %q", lines[:2])
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || !strings.HasPrefix(f[0], "/dev/infiniband/") || f[1] != "c" {
			t.Fatalf("line %q is not \"/dev/infiniband/<name> c <major> <minor>\"", sc.Text())
		}
		for _, n := range f[2:] {
			if _, err := strconv.ParseUint(n, 10, 32); err != nil {
				t.Errorf("line %q: %v", sc.Text(), err)
			}
		}
		if seen[f[2]+":"+f[3]] {
			t.Errorf("device number %s:%s used twice", f[2], f[3])
		}
		seen[f[2]+":"+f[3]] = true
	}
}

func TestMakeDevNodes(t *testing.T) {
	n := smallNode()
	devRoot := t.TempDir()
	err := n.MakeDevNodes(devRoot)
	if os.Geteuid() != 0 {
		// Without CAP_MKNOD the error must say why.
		if err == nil || !strings.Contains(err.Error(), "needs root or CAP_MKNOD") {
			t.Fatalf("MakeDevNodes as non-root = %v, want an error about CAP_MKNOD", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("MakeDevNodes: %v", err)
	}
	for _, c := range n.CharDevs() {
		t.Run(c.Name, func(t *testing.T) {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(devRoot, "infiniband", c.Name), &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFCHR {
				t.Errorf("mode %o is not a character device", st.Mode)
			}
			if unix.Major(st.Rdev) != c.Major || unix.Minor(st.Rdev) != c.Minor {
				t.Errorf("rdev %d:%d, want %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev), c.Major, c.Minor)
			}
			if os.FileMode(st.Mode&0o777) != c.Mode {
				t.Errorf("permissions %o, want %o", st.Mode&0o777, c.Mode)
			}
		})
	}
	t.Run("again", func(t *testing.T) {
		if err := n.MakeDevNodes(devRoot); err != nil {
			t.Errorf("second MakeDevNodes: %v", err)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		p := filepath.Join(devRoot, "infiniband", "umad1")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		err := n.MakeDevNodes(devRoot)
		if err == nil || !strings.Contains(err.Error(), "something else is already there") {
			t.Errorf("MakeDevNodes over a regular file = %v", err)
		}
	})
	t.Run("unwritable root", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := n.MakeDevNodes(f); err == nil {
			t.Errorf("MakeDevNodes below a regular file = %v", err)
		}
	})
}
