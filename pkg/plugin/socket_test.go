package plugin

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestDRASocketName(t *testing.T) {
	const uid = "c0d91f60-f925-40cf-a4cf-1267cea855db"
	tests := []struct {
		name, dataDir, podUID string
		want, wantErr         string
	}{
		{name: "no rolling update", dataDir: "/var/lib/kubelet/plugins/rdma.dra.io", want: "dra.sock"},
		{name: "rolling update, fits", dataDir: "/var/lib/kubelet/plugins/rdma.dra.io", podUID: uid, want: "dra-" + uid + ".sock"},
		// The local cluster's kubelet directory with the e2e suite's second driver.
		{name: "rolling update, hashed", dataDir: "/var/lib/rdma-dra-local/kubelet/plugins/second.rdma.example.com", podUID: uid, want: "dra-"},
		{name: "too long for anything", dataDir: "/" + strings.Repeat("d", 100), podUID: uid, wantErr: "more than a unix socket path can be (108)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := draSocketName(tc.dataDir, tc.podUID)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("draSocketName = %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got, tc.want) || len(filepath.Join(tc.dataDir, got)) > unixPathMax {
				t.Errorf("draSocketName = %q (path %d bytes), want %s... within %d", got, len(filepath.Join(tc.dataDir, got)), tc.want, unixPathMax)
			}
			if again, _ := draSocketName(tc.dataDir, tc.podUID); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
	a, _ := draSocketName("/var/lib/rdma-dra-local/kubelet/plugins/second.rdma.example.com", uid)
	b, _ := draSocketName("/var/lib/rdma-dra-local/kubelet/plugins/second.rdma.example.com", "d0d91f60-f925-40cf-a4cf-1267cea855db")
	if a == b {
		t.Errorf("two pods' hashed sockets collide: %s", a)
	}
}
