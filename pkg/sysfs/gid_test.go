package sysfs

import (
	"errors"
	"testing"
)

func TestParseGID(t *testing.T) {
	tests := []struct {
		name                                  string
		in                                    string
		wantErr                               bool
		zero, v4mapped, linkLocal, globalIPv6 bool
	}{
		{name: "ipv4 mapped", in: "0000:0000:0000:0000:0000:ffff:0a00:0605", v4mapped: true},
		{name: "link local", in: "fe80:0000:0000:0000:7c8c:0903:00c3:cfee", linkLocal: true},
		{name: "link local upper half of fe80::/10", in: "febf:0000:0000:0000:0000:0000:0000:0001", linkLocal: true},
		{name: "ipv4 link local is not routable", in: "0000:0000:0000:0000:0000:ffff:a9fe:0304", v4mapped: true, linkLocal: true},
		{name: "all zero", in: "0000:0000:0000:0000:0000:0000:0000:0000", zero: true},
		{name: "global", in: "2001:0db8:0000:0000:0000:0000:0000:0001", globalIPv6: true},
		{name: "unique local counts as global", in: "fd00:0000:0000:0000:0000:0000:0000:0042", globalIPv6: true},
		{name: "upper case", in: "2001:0DB8:0000:0000:0000:0000:0000:00AB", globalIPv6: true},
		{name: "multicast is not global unicast", in: "ff02:0000:0000:0000:0000:0000:0000:0001"},
		{name: "compressed", in: "fe80::1", wantErr: true},
		{name: "seven groups", in: "0000:0000:0000:0000:0000:ffff:0a00", wantErr: true},
		{name: "bad digit", in: "0000:0000:0000:0000:0000:ffff:0a00:06g5", wantErr: true},
		{name: "wrong separator", in: "0000-0000:0000:0000:0000:ffff:0a00:0605", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseGID(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrSyntax) {
					t.Fatalf("ParseGID(%q) error = %v, want ErrSyntax", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseGID(%q): %v", tt.in, err)
			}
			if got := g.IsZero(); got != tt.zero {
				t.Errorf("IsZero() = %v, want %v", got, tt.zero)
			}
			if got := g.IsIPv4Mapped(); got != tt.v4mapped {
				t.Errorf("IsIPv4Mapped() = %v, want %v", got, tt.v4mapped)
			}
			if got := g.IsLinkLocal(); got != tt.linkLocal {
				t.Errorf("IsLinkLocal() = %v, want %v", got, tt.linkLocal)
			}
			if got := g.IsGlobalIPv6(); got != tt.globalIPv6 {
				t.Errorf("IsGlobalIPv6() = %v, want %v", got, tt.globalIPv6)
			}
			if got, want := g.IsRoutable(), (tt.v4mapped || tt.globalIPv6) && !tt.linkLocal; got != want {
				t.Errorf("IsRoutable() = %v, want %v", got, want)
			}
		})
	}
}

func TestGIDString(t *testing.T) {
	const in = "0000:0000:0000:0000:0000:ffff:0A00:0605"
	g, err := ParseGID(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.String(), "0000:0000:0000:0000:0000:ffff:0a00:0605"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := g.Addr().String(), "::ffff:10.0.6.5"; got != want {
		t.Errorf("Addr() = %q, want %q", got, want)
	}
}

func TestParseGIDType(t *testing.T) {
	tests := []struct {
		in      string
		want    GIDType
		wantErr bool
	}{
		{in: "RoCE v2", want: GIDTypeRoCEv2},
		{in: "IB/RoCE v1", want: GIDTypeRoCEv1},
		{in: "RoCE V2", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGIDType(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}
