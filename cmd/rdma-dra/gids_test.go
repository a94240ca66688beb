package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// TestDiscoverGIDs checks `discover --gids` on every profile with RoCE ports against the
// GID tables in the tree, read here file by file, and against sysfs.md's rule applied
// here on its own: the lowest RoCE v2 entry with an IPv4-mapped GID, else the lowest
// RoCE v2 entry with a global IPv6 GID, else none; all-zero and link-local entries
// never count. The mock profiles' own expectations must agree.
func TestDiscoverGIDs(t *testing.T) {
	for _, profile := range []string{"mixed-bond", "roce-lag", "vpi-dual-port", "sriov", "soft-roce", "intel-e810", "broadcom"} {
		t.Run(profile, func(t *testing.T) {
			root := writeProfile(t, profile, "Y")
			out, stderr, code := runApp(t, "", "discover", "--gids", "--sysfs-root", root)
			if code != 0 {
				t.Fatalf("status %d: %s", code, stderr)
			}
			table, summary, _ := strings.Cut(out, "\n\n")
			rows := map[string][]string{} // "ibdev/port/index" -> columns
			for _, l := range strings.Split(table, "\n")[1:] {
				f := strings.Fields(l)
				rows[f[0]+"/"+f[1]+"/"+f[2]] = f
			}
			p, _ := mocknode.Lookup(profile)
			expected := map[string]*int{}
			for _, e := range p.Node().ExpectedPorts() {
				expected[fmt.Sprintf("%s/%d", e.IBDev, e.Port)] = e.GIDIndex
			}
			ports, _ := filepath.Glob(filepath.Join(root, "class/infiniband/*/ports/*"))
			seen := 0
			for _, pdir := range ports {
				ibdev := filepath.Base(filepath.Dir(filepath.Dir(pdir)))
				port := filepath.Base(pdir)
				key := ibdev + "/" + port
				ll := readTrim(t, filepath.Join(pdir, "link_layer"))
				var idxs []int
				names, _ := os.ReadDir(filepath.Join(pdir, "gids"))
				for _, n := range names {
					i, _ := strconv.Atoi(n.Name())
					idxs = append(idxs, i)
				}
				sort.Ints(idxs)
				var v4, v6 = -1, -1
				for _, i := range idxs {
					gid := readTrim(t, filepath.Join(pdir, "gids", strconv.Itoa(i)))
					addr := gidAddr(t, gid)
					row, listed := rows[fmt.Sprintf("%s/%s/%d", ibdev, port, i)]
					if addr.IsUnspecified() {
						if listed {
							t.Errorf("%s: all-zero entry %d listed", key, i)
						}
						continue
					}
					seen++
					if !listed {
						t.Errorf("%s: entry %d (%s) not listed", key, i, gid)
						continue
					}
					if row[3] != gid {
						t.Errorf("%s/%d: GID %s, want %s", key, i, row[3], gid)
					}
					typ, _ := os.ReadFile(filepath.Join(pdir, "gid_attrs/types", strconv.Itoa(i)))
					wantVer := map[string]string{"RoCE v2": "v2", "IB/RoCE v1": "v1"}[strings.TrimSpace(string(typ))]
					if ll == "InfiniBand" {
						wantVer = "IB"
					}
					if row[5] != wantVer {
						t.Errorf("%s/%d: VER %s, want %s", key, i, row[5], wantVer)
					}
					if ll == "Ethernet" {
						wantAddr := addr.String()
						if addr.Is4In6() {
							wantAddr = addr.Unmap().String()
						}
						if row[4] != wantAddr {
							t.Errorf("%s/%d: ADDRESS %s, want %s", key, i, row[4], wantAddr)
						}
						if ndev, err := os.ReadFile(filepath.Join(pdir, "gid_attrs/ndevs", strconv.Itoa(i))); err == nil && row[6] != strings.TrimSpace(string(ndev)) {
							t.Errorf("%s/%d: NETDEV %s, want %s", key, i, row[6], ndev)
						}
					}
					if ll != "Ethernet" || wantVer != "v2" || addr.IsLinkLocalUnicast() {
						continue
					}
					if addr.Is4In6() && v4 < 0 {
						v4 = i
					} else if !addr.Is4In6() && addr.IsGlobalUnicast() && v6 < 0 {
						v6 = i
					}
				}
				want := v4
				if want < 0 {
					want = v6
				}
				var wantLine string
				switch {
				case want >= 0:
					wantLine = fmt.Sprintf("%s: gid_index %d: ", key, want)
				default:
					wantLine = key + ": no gid_index: "
				}
				if !strings.Contains(summary, wantLine) {
					t.Errorf("summary lacks %q:\n%s", wantLine, summary)
				}
				for k, f := range rows {
					if strings.HasPrefix(k, key+"/") && (len(f) == 9) != (k == fmt.Sprintf("%s/%d", key, want)) {
						t.Errorf("%s: marked %v, want only index %d marked", k, f, want)
					}
				}
				if e := expected[key]; (e == nil) != (want < 0) || (e != nil && *e != want) {
					t.Errorf("%s: the profile expects GID index %v, the rule says %d", key, e, want)
				}
			}
			if seen != len(rows) {
				t.Errorf("%d rows listed, %d valid entries in the tree", len(rows), seen)
			}
		})
	}
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func gidAddr(t *testing.T, gid string) netip.Addr {
	t.Helper()
	var b [16]byte
	hex := strings.ReplaceAll(gid, ":", "")
	for i := range b {
		v, err := strconv.ParseUint(hex[2*i:2*i+2], 16, 8)
		if err != nil {
			t.Fatalf("GID %q: %v", gid, err)
		}
		b[i] = byte(v)
	}
	return netip.AddrFrom16(b)
}
