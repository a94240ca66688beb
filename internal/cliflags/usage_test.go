package cliflags

import (
	"errors"
	"fmt"
	"testing"
)

func TestNearest(t *testing.T) {
	names := []string{"sysfs-root", "output", "o", "gids", "config", "shares", "version"}
	for _, tt := range []struct{ in, want string }{
		{"sysfs-rot", "sysfs-root"},
		{"sysfsroot", "sysfs-root"},
		{"ouptut", "output"},
		{"shrae", "shares"},
		{"verison", "version"},
		{"gid", "gids"},
		{"frobnicate", ""},
		{"x", ""},
		{"s", ""}, // a single letter is no typo, not even of "shares"
	} {
		if got := Nearest(tt.in, names); got != tt.want {
			t.Errorf("Nearest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("read x: no such file"), 1},
		{Usagef("unknown flag"), 2},
		{fmt.Errorf("wrapped: %w", Usagef("bad value")), 2},
		{&StatusError{Status: 3, Err: errors.New("would widen")}, 3},
		{fmt.Errorf("wrapped: %w", &StatusError{Status: 3, Err: Usagef("would widen")}), 3},
	} {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
