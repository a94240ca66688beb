package localcluster

import (
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

func TestStatusWhole(t *testing.T) {
	tests := []struct {
		name    string
		rows    int
		running int
		want    bool
		wantErr string
	}{
		{"down", 7, 0, false, ""},
		{"up", 7, 7, true, ""},
		{"partly", 7, 2, false, "cluster partly running (2 of 7 processes)"},
		{"no processes known", 0, 0, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statusReport{rows: make([][2]string, tc.rows), running: tc.running}.whole()
			if got != tc.want {
				t.Errorf("whole() = %t, want %t", got, tc.want)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("whole() err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRuncBinary(t *testing.T) {
	bins := &bincache.Cache{Helpers: bincache.Component{Dir: "/cache/helpers"}}
	tests := []struct {
		name  string
		facts host.Facts
		want  string
	}{
		{"host runc", host.Facts{}, "/usr/sbin/runc"},
		{"cgroup v1 alone", host.Facts{CgroupV1: true}, "/usr/sbin/runc"},
		{"oom_score_adj locked", host.Facts{OOMScoreAdjLocked: true}, "/cache/helpers/runc-oomclamp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := runcBinary(&tc.facts, bins); got != tc.want {
				t.Errorf("runcBinary = %s, want %s", got, tc.want)
			}
		})
	}
}
