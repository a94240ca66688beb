package mockgpu

import (
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	valid := Config{NodeName: "node-a", SysfsRoot: "/var/lib/rdma-dra-local/mock/sys", CDIRoot: "/var/run/cdi", KubeletRoot: "/var/lib/rdma-dra-local/kubelet"}
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr []string
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "no node", change: func(c *Config) { c.NodeName = "" }, wantErr: []string{"--node-name is required"}},
		{name: "relative paths", change: func(c *Config) { c.SysfsRoot, c.KubeletRoot = "sys", "" }, wantErr: []string{
			`--sysfs-root must be an absolute path, got "sys"`,
			`--kubelet-root must be an absolute path, got ""`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.change(&c)
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() error = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() error = %v, want it to contain %q", err, want)
				}
			}
		})
	}
	if got, want := valid.RegistrarDir(), "/var/lib/rdma-dra-local/kubelet/plugins_registry"; got != want {
		t.Errorf("RegistrarDir() = %s, want %s", got, want)
	}
	if got, want := valid.DataDir(), "/var/lib/rdma-dra-local/kubelet/plugins/gpu.mock.rdma.dra.io"; got != want {
		t.Errorf("DataDir() = %s, want %s", got, want)
	}
}
