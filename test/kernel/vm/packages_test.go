package vm

import (
	"strings"
	"testing"
)

func TestParseLock(t *testing.T) {
	pkgs, err := ParseLock("packages.lock", []byte("# pinned\n\nlinux-image-6.1.0-56-amd64 6.1.192-2\nbusybox-static 1:1.35.0-4+deb12u1+b1\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{{"linux-image-6.1.0-56-amd64", "6.1.192-2"}, {"busybox-static", "1:1.35.0-4+deb12u1+b1"}}
	if len(pkgs) != len(want) || pkgs[0] != want[0] || pkgs[1] != want[1] {
		t.Fatalf("got %+v, want %+v", pkgs, want)
	}
	if LockKey(pkgs) == LockKey(pkgs[:1]) {
		t.Error("two different locks have one key")
	}
	for _, tc := range []struct{ name, in, want string }{
		{"one field", "busybox-static\n", `packages.lock:1: want "name version"`},
		{"bad name", "Busybox 1.0\n", `packages.lock:1: "Busybox" is not a Debian package name`},
		{"bad version", "busybox-static latest\n", `packages.lock:1: "latest" is not a Debian version`},
		{"twice", "a1 1.0\n\na1 2.0\n", "packages.lock:3: a1 is pinned already on line 1"},
		{"empty", "# nothing\n", "packages.lock: no packages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLock("packages.lock", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseLoaderList(t *testing.T) {
	const root = "/cache/root"
	ok := "\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\tlibibverbs.so.1 => /cache/root/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0 (0x00007f)\n" +
		"\tlibc.so.6 => /cache/root/lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 => /cache/root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 (0x00007f)\n"
	libs, err := parseLoaderList(root, "usr/bin/ibv_devinfo", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	// The soname's path, not the file the link points to; the loader itself is left out.
	if got := strings.Join(libs, " "); got != "usr/lib/x86_64-linux-gnu/libibverbs.so.1 lib/x86_64-linux-gnu/libc.so.6" {
		t.Errorf("libraries %q", got)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"missing", "\tlibnl-3.so.200 => not found\n", "usr/bin/ibv_devinfo needs libnl-3.so.200, which no pinned package has"},
		{"from the host", "\tlibbsd.so.0 => /lib/x86_64-linux-gnu/libbsd.so.0 (0x7f)\n", "needs libbsd.so.0, found only on the host (/lib/x86_64-linux-gnu/libbsd.so.0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseLoaderList(root, "usr/bin/ibv_devinfo", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko": "rdma_rxe",
		"kernel/net/ipv6/ip6_udp_tunnel.ko":            "ip6_udp_tunnel",
		"kernel/crypto/crc32-generic.ko":               "crc32_generic",
	} {
		if got := moduleName(in); got != want {
			t.Errorf("moduleName(%q) = %q, want %q", in, got, want)
		}
	}
}
