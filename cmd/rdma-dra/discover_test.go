package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// runCLI runs the rdma-dra app with args, as main does, and returns what it printed
// on stdout and stderr together.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Writer = &out
	app.ErrWriter = &out
	err := app.RunContext(context.Background(), append([]string{"rdma-dra"}, args...))
	return out.String(), err
}

// runApp runs the app as main does and returns stdout, stderr and the exit status.
func runApp(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Reader = strings.NewReader(stdin)
	app.Writer = &out
	app.ErrWriter = &errOut
	code = cliflags.Run(context.Background(), app, append([]string{"rdma-dra"}, args...), &errOut)
	return out.String(), errOut.String(), code
}

// writeProfile writes a mock node profile, with netns mode mode ("Y" or "N"), and
// returns its sysfs root.
func writeProfile(t *testing.T, name, mode string) string {
	t.Helper()
	p, err := mocknode.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	n := p.Node()
	n.NetnsMode = mode
	dir := t.TempDir()
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, mocknode.SysDir)
}

var columnSep = regexp.MustCompile(`  +`)

func TestDiscoverTable(t *testing.T) {
	root := writeProfile(t, "mixed-bond", "N")
	out, err := runCLI(t, "discover", "--sysfs-root", root)
	if err != nil {
		t.Fatalf("discover: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if want := "RDMA netns mode: exclusive   sysfs: " + root + "   ports: 6"; lines[0] != want {
		t.Errorf("header = %q, want %q", lines[0], want)
	}
	wantHeader := []string{"PORT", "NETDEV", "OPER", "LINK", "STATE", "SPEED", "MTU", "LID", "SM LID", "PORT GUID", "NUMA", "PCIE ROOT", "GID", "MODEL", "FIRMWARE", "FLAGS"}
	if got := columnSep.Split(strings.TrimSpace(lines[1]), -1); !slices.Equal(got, wantHeader) {
		t.Errorf("columns = %q, want %q", got, wantHeader)
	}
	rows := map[string][]string{}
	for _, l := range lines[2 : len(lines)-1] {
		cols := columnSep.Split(strings.TrimSpace(l), -1)
		rows[cols[0]] = cols
	}
	if last := lines[len(lines)-1]; last != "GID n/a: InfiniBand ports have no GID index" {
		t.Errorf("footnote = %q", last)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6:\n%s", len(rows), out)
	}
	tests := []struct {
		port string
		want []string
	}{
		{port: "mlx5_0/1", want: []string{"mlx5_0/1", "ibp24s0", "up", "InfiniBand", "ACTIVE (LinkUp)", "400 Gb/s", "4092", "64", "1", "946d:ae03:008e:5c10", "0", "pci0000:15", "n/a", "ConnectX-7", "28.39.1002", "-"}},
		{port: "mlx5_4/1", want: []string{"mlx5_4/1", "bond0", "up", "Ethernet", "ACTIVE (LinkUp)", "100 Gb/s", "9000", "-", "-", "966d:aeff:fe5e:0a00", "0", "pci0000:5d", "3", "ConnectX-6 Dx", "22.39.1002", "lag"}},
		{port: "mlx5_5/1", want: []string{"mlx5_5/1", "bond0", "up", "Ethernet", "ACTIVE (LinkUp)", "100 Gb/s", "9000", "-", "-", "966d:aeff:fe5e:0a00", "0", "pci0000:5d", "3", "ConnectX-6 Dx", "22.39.1002", "lag"}},
	}
	for _, tt := range tests {
		t.Run(tt.port, func(t *testing.T) {
			if got := rows[tt.port]; !slices.Equal(got, tt.want) {
				t.Errorf("row = %q\nwant  %q", got, tt.want)
			}
		})
	}
}

func TestDiscoverJSONAndYAML(t *testing.T) {
	root := writeProfile(t, "mixed-bond", "Y")
	jsonOut, errOut, code := runApp(t, "", "discover", "--sysfs-root", root, "-o", "json")
	if code != 0 {
		t.Fatalf("discover -o json: %d %s", code, errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(jsonOut), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, jsonOut)
	}
	if doc["netns_mode"] != "shared" || doc["version"] != "rdma.dra.io/inventory/v1" {
		t.Errorf("netns_mode = %v, version %v", doc["netns_mode"], doc["version"])
	}
	ports, _ := doc["ports"].([]any)
	if len(ports) != 6 {
		t.Fatalf("%d ports, want 6", len(ports))
	}
	byName := map[string]map[string]any{}
	for _, d := range ports {
		m := d.(map[string]any)
		byName[fmt.Sprintf("%s/%v", m["ibdev"], m["port"])] = m
	}
	tests := []struct {
		name string
		want map[string]any
	}{
		{name: "mlx5_0/1", want: map[string]any{"link_layer": "InfiniBand", "port_state": "ACTIVE",
			"phys_state": "LinkUp", "speed_gbps": 400.0, "netdev": "ibp24s0", "netdev_operstate": "up", "mtu": 4092.0, "numa_node": 0.0, "gid_index": nil,
			"pcie_root": "pci0000:15", "sriov_vf": false, "lag": false, "model": "ConnectX-7", "vendor_id": "15b3", "device_id": "1021",
			"driver": "mlx5_core", "physfn": nil}},
		{name: "mlx5_4/1", want: map[string]any{"link_layer": "Ethernet", "netdev": "bond0", "mtu": 9000.0,
			"gid_index": 3.0, "lag": true, "model": "ConnectX-6 Dx", "pcie_root": "pci0000:5d", "lid": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := byName[tt.name]
			if !ok {
				t.Fatalf("no port %s in %v", tt.name, jsonOut)
			}
			for k, v := range tt.want {
				if d[k] != v {
					t.Errorf("%s = %#v, want %#v", k, d[k], v)
				}
			}
			if uv, _ := d["uverbs"].(map[string]any); uv == nil || !strings.HasPrefix(uv["name"].(string), "uverbs") {
				t.Errorf("uverbs = %v, want a uverbsN device", d["uverbs"])
			}
		})
	}

	yamlOut, _, code := runApp(t, "", "discover", "--sysfs-root", root, "-o", "yaml")
	if code != 0 {
		t.Fatalf("discover -o yaml: %d", code)
	}
	fromYAML, err := yaml.YAMLToJSON([]byte(yamlOut))
	if err != nil {
		t.Fatalf("output is not YAML: %v", err)
	}
	var yamlDoc map[string]any
	if err := json.Unmarshal(fromYAML, &yamlDoc); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(doc)
	b, _ := json.Marshal(yamlDoc)
	if !bytes.Equal(a, b) {
		t.Errorf("yaml and json describe different objects:\njson %s\nyaml %s", a, b)
	}
	// The keys come in the same order in both.
	keyOrder := regexp.MustCompile(`(?m)^\s*"?([a-z_]+)"?:`)
	var jk, yk []string
	for _, m := range keyOrder.FindAllStringSubmatch(jsonOut, -1) {
		jk = append(jk, m[1])
	}
	for _, m := range keyOrder.FindAllStringSubmatch(strings.ReplaceAll(yamlOut, "- ", "  "), -1) {
		yk = append(yk, m[1])
	}
	if !slices.Equal(jk, yk) {
		t.Errorf("key order differs:\njson %v\nyaml %v", jk, yk)
	}
}

func TestDiscoverEnvAndErrors(t *testing.T) {
	root := writeProfile(t, "soft-roce", "Y")
	t.Run("env twins", func(t *testing.T) {
		t.Setenv("RDMA_DRA_SYSFS_ROOT", root)
		t.Setenv("RDMA_DRA_OUTPUT", "json")
		t.Setenv("OUTPUT", "out.txt")
		t.Setenv("SYSFS_ROOT", "/nonexistent")
		out, err := runCLI(t, "discover")
		if err != nil || !strings.Contains(out, `"ibdev": "rxe0"`) || !strings.Contains(out, `"model": "Soft-RoCE"`) {
			t.Errorf("discover from env = %v\n%s", err, out)
		}
	})
}

func TestDiscoverEmptyNode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "class"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "discover", "--sysfs-root", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "RDMA netns mode: unknown") || !strings.Contains(out, "no RDMA devices found") {
		t.Errorf("empty node output:\n%s", out)
	}
	out, err = runCLI(t, "discover", "--sysfs-root", dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"version\": \"rdma.dra.io/inventory/v1\",\n  \"ports\": []\n}\n"; out != want {
		t.Errorf("empty node json = %q, want %q", out, want)
	}
}
