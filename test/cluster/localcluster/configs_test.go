package localcluster

import (
	"net"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

func TestFeatureGateMap(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]bool
		wantErr bool
	}{
		{"", map[string]bool{}, false},
		{"A=true, B=false", map[string]bool{"A": true, "B": false}, false},
		{"A=yes", nil, true},
		{"A", nil, true},
	}
	for _, tc := range tests {
		got, err := featureGateMap(tc.in)
		if (err != nil) != tc.wantErr {
			t.Fatalf("featureGateMap(%q) err = %v", tc.in, err)
		}
		if err == nil && len(got) != len(tc.want) {
			t.Fatalf("featureGateMap(%q) = %v, want %v", tc.in, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("featureGateMap(%q)[%s] = %v, want %v", tc.in, k, got[k], v)
			}
		}
	}
}

func TestQuirksInConfigs(t *testing.T) {
	l := NewLayout("/repo")
	tests := []struct {
		name      string
		facts     host.Facts
		gates     map[string]bool
		want      []string
		wantNot   []string
		runc      string
		inRuntime string
	}{
		{
			name:  "cgroup v1, locked oom score, cgroupfs",
			facts: host.Facts{CgroupV1: true, CgroupDriver: "cgroupfs", OOMScoreAdjLocked: true, NodeName: "n", NodeIP: net.IPv4(192, 0, 2, 2), ResolvConf: "/etc/resolv.conf"},
			want:  []string{"failCgroupV1: false", "oomScoreAdj: 0", "cgroupDriver: cgroupfs"},
			runc:  "/x/runc-oomclamp", inRuntime: `BinaryName = "/x/runc-oomclamp"`,
		},
		{
			name:    "systemd host with gates",
			facts:   host.Facts{CgroupDriver: "systemd", NodeName: "n", NodeIP: net.IPv4(10, 0, 0, 1), ResolvConf: "/run/systemd/resolve/resolv.conf"},
			gates:   map[string]bool{"B": false, "A": true},
			want:    []string{"cgroupDriver: systemd", "featureGates:\n  A: true\n  B: false\n", "resolvConf: /run/systemd/resolve/resolv.conf"},
			wantNot: []string{"oomScoreAdj"},
			runc:    "/usr/sbin/runc", inRuntime: "SystemdCgroup = true",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc := kubeletConfig(l, &tc.facts, tc.gates)
			for _, w := range tc.want {
				if !strings.Contains(kc, w) {
					t.Errorf("kubelet config lacks %q:\n%s", w, kc)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(kc, w) {
					t.Errorf("kubelet config has %q:\n%s", w, kc)
				}
			}
			cc := containerdConfig(l, &tc.facts, tc.runc)
			for _, w := range []string{tc.inRuntime, `cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]`, `sandbox = "localhost/pause:latest"`, `address = "/run/rdma-dra-local/containerd.sock"`} {
				if !strings.Contains(cc, w) {
					t.Errorf("containerd config lacks %q:\n%s", w, cc)
				}
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/var/lib/x`:       "/var/lib/x",
		`/var/lib/a\040b`:  "/var/lib/a b",
		`/run/x\011y\134z`: "/run/x\ty\\z",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
