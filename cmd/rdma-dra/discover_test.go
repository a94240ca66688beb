package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	logsapi "k8s.io/component-base/logs/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// runCLI runs the rdma-dra app with args, as main does, and returns what it printed.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	// Every run applies the same logging flags again; that is allowed as long as they
	// do not change.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	var out bytes.Buffer
	app := newApp()
	app.Writer = &out
	app.ErrWriter = &out
	err := app.RunContext(context.Background(), append([]string{"rdma-dra"}, args...))
	return out.String(), err
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
	wantHeader := []string{"PORT", "NETDEV", "LINK", "STATE", "SPEED", "MTU", "NUMA", "PCIE ROOT", "GID", "MODEL", "FIRMWARE", "FLAGS"}
	if got := columnSep.Split(strings.TrimSpace(lines[1]), -1); !slices.Equal(got, wantHeader) {
		t.Errorf("columns = %q, want %q", got, wantHeader)
	}
	rows := map[string][]string{}
	for _, l := range lines[2:] {
		cols := columnSep.Split(strings.TrimSpace(l), -1)
		rows[cols[0]] = cols
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6:\n%s", len(rows), out)
	}
	tests := []struct {
		port string
		want []string
	}{
		{port: "mlx5_0/1", want: []string{"mlx5_0/1", "ibp24s0", "InfiniBand", "ACTIVE (LinkUp)", "400 Gb/s", "4092", "0", "pci0000:15", "-", "ConnectX-7", "28.39.1002", "-"}},
		{port: "mlx5_4/1", want: []string{"mlx5_4/1", "bond0", "Ethernet", "ACTIVE (LinkUp)", "100 Gb/s", "9000", "0", "pci0000:5d", "3", "ConnectX-6 Dx", "22.39.1002", "lag"}},
		{port: "mlx5_5/1", want: []string{"mlx5_5/1", "bond0", "Ethernet", "ACTIVE (LinkUp)", "100 Gb/s", "9000", "0", "pci0000:5d", "3", "ConnectX-6 Dx", "22.39.1002", "lag"}},
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
	jsonOut, err := runCLI(t, "discover", "--sysfs-root", root, "-o", "json")
	if err != nil {
		t.Fatalf("discover -o json: %v\n%s", err, jsonOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(jsonOut), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, jsonOut)
	}
	if doc["netns_mode"] != "shared" {
		t.Errorf("netns_mode = %v, want shared", doc["netns_mode"])
	}
	devices, _ := doc["devices"].([]any)
	if len(devices) != 6 {
		t.Fatalf("%d devices, want 6", len(devices))
	}
	byName := map[string]map[string]any{}
	for _, d := range devices {
		m := d.(map[string]any)
		byName[m["name"].(string)] = m
	}
	required := []string{"name", "ibdev", "port", "link_layer", "port_state", "phys_state", "speed_gbps", "netdev", "mtu",
		"numa_node", "gid_index", "pci_bus_id", "pcie_root", "sriov_vf", "lag", "model", "fw_ver", "node_guid", "driver",
		"vendor_id", "device_id", "uverbs", "umad", "issm"}
	tests := []struct {
		name string
		want map[string]any
	}{
		{name: "mlx5-0-p1", want: map[string]any{"ibdev": "mlx5_0", "port": 1.0, "link_layer": "InfiniBand", "port_state": "ACTIVE",
			"phys_state": "LinkUp", "speed_gbps": 400.0, "netdev": "ibp24s0", "mtu": 4092.0, "numa_node": 0.0, "gid_index": nil,
			"pcie_root": "pci0000:15", "sriov_vf": false, "lag": false, "model": "ConnectX-7", "vendor_id": "15b3", "device_id": "1021",
			"driver": "mlx5_core", "physfn": nil}},
		{name: "mlx5-4-p1", want: map[string]any{"ibdev": "mlx5_4", "link_layer": "Ethernet", "netdev": "bond0", "mtu": 9000.0,
			"gid_index": 3.0, "lag": true, "model": "ConnectX-6 Dx", "pcie_root": "pci0000:5d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := byName[tt.name]
			if !ok {
				t.Fatalf("no device %s in %v", tt.name, jsonOut)
			}
			for _, k := range required {
				if _, ok := d[k]; !ok {
					t.Errorf("key %q missing", k)
				}
			}
			for k, v := range tt.want {
				if d[k] != v {
					t.Errorf("%s = %#v, want %#v", k, d[k], v)
				}
			}
			if uv, _ := d["uverbs"].(map[string]any); uv == nil || !strings.HasPrefix(uv["path"].(string), "/dev/infiniband/uverbs") {
				t.Errorf("uverbs = %v, want a /dev/infiniband/uverbsN device", d["uverbs"])
			}
		})
	}

	yamlOut, err := runCLI(t, "discover", "--sysfs-root", root, "-o", "yaml")
	if err != nil {
		t.Fatalf("discover -o yaml: %v", err)
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
}

func TestDiscoverEnvAndErrors(t *testing.T) {
	root := writeProfile(t, "soft-roce", "Y")
	t.Run("env twins", func(t *testing.T) {
		t.Setenv("SYSFS_ROOT", root)
		t.Setenv("OUTPUT", "json")
		out, err := runCLI(t, "discover")
		if err != nil || !strings.Contains(out, `"ibdev": "rxe0"`) || !strings.Contains(out, `"model": "Soft-RoCE"`) {
			t.Errorf("discover from env = %v\n%s", err, out)
		}
	})
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "unknown output", args: []string{"discover", "--sysfs-root", root, "-o", "xml"}, wantErr: `unknown output format "xml"`},
		{name: "missing root", args: []string{"discover", "--sysfs-root", filepath.Join(root, "nope")}, wantErr: "open sysfs root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runCLI(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestDiscoverEmptyNode(t *testing.T) {
	out, err := runCLI(t, "discover", "--sysfs-root", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "RDMA netns mode: unknown") || !strings.Contains(out, "no RDMA devices found") {
		t.Errorf("empty node output:\n%s", out)
	}
	out, err = runCLI(t, "discover", "--sysfs-root", t.TempDir(), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"netns_mode\": null,\n  \"devices\": []\n}\n"; out != want {
		t.Errorf("empty node json = %q, want %q", out, want)
	}
}
