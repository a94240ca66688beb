package discovery

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// The GID index rule over table entries, below the tree: an internal test, unlike the
// tests of whole mock nodes (package discovery_test).

func mustGID(t *testing.T, s string) sysfs.GID {
	t.Helper()
	return sysfs.GID(netip.MustParseAddr(s).As16())
}

func TestGIDIndexOnEntries(t *testing.T) {
	const (
		ll   = "fe80::1"
		v4a  = "::ffff:10.0.0.1"
		v4b  = "::ffff:10.0.0.2"
		v6   = "2001:db8::1"
		ula  = "fd00::7"
		zero = "::"
	)
	v1, v2 := sysfs.GIDTypeRoCEv1, sysfs.GIDTypeRoCEv2
	type e struct {
		i   int
		gid string
		typ sysfs.GIDType
	}
	tests := []struct {
		name      string
		entries   []e
		wantIndex *int
	}{
		{name: "kernel default table", entries: []e{{0, ll, v1}, {1, ll, v2}, {2, v4a, v1}, {3, v4a, v2}}, wantIndex: ptr(3)},
		{name: "sparse table", entries: []e{{0, ll, v1}, {7, v4a, v2}, {200, v4b, v2}}, wantIndex: ptr(7)},
		{name: "IPv4 wins over a lower IPv6", entries: []e{{1, v6, v2}, {5, v4a, v2}}, wantIndex: ptr(5)},
		{name: "IPv6 only", entries: []e{{0, ll, v1}, {1, ll, v2}, {2, v6, v1}, {3, v6, v2}}, wantIndex: ptr(3)},
		{name: "unique local IPv6", entries: []e{{4, ula, v2}}, wantIndex: ptr(4)},
		{name: "link local only", entries: []e{{0, ll, v1}, {1, ll, v2}}},
		{name: "RoCE v1 IPv4 does not count", entries: []e{{2, v4a, v1}}},
		{name: "zero entries never count", entries: []e{{0, zero, v2}, {1, v4a, v2}}, wantIndex: ptr(1)},
		{name: "empty table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var entries []gidEntry
			for _, x := range tt.entries {
				entries = append(entries, gidEntry{index: x.i, gid: mustGID(t, x.gid), typ: x.typ})
			}
			if diff := cmp.Diff(tt.wantIndex, gidIndex(entries)); diff != "" {
				t.Errorf("gidIndex (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
