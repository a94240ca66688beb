package driverimage

import (
	"slices"
	"testing"
)

func TestGoBuildArgs(t *testing.T) {
	pkgs := []string{"./cmd/a", "./cmd/b"}
	for _, tc := range []struct {
		name string
		tags string
		want []string
	}{
		{
			name: "release image, no tags",
			want: []string{"build", "-trimpath", "-tags", "", "-ldflags", "-s -w", "-o", "/out/bin-v1/", "./cmd/a", "./cmd/b"},
		},
		{
			name: "local cluster image with the failpoint",
			tags: "failpoint",
			want: []string{"build", "-trimpath", "-tags", "failpoint", "-ldflags", "-s -w", "-o", "/out/bin-v1/", "./cmd/a", "./cmd/b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := goBuildArgs(Options{LDFlags: "-s -w", Tags: tc.tags}, "/out/bin-v1", pkgs)
			if !slices.Equal(got, tc.want) {
				t.Errorf("goBuildArgs = %q\nwant          %q", got, tc.want)
			}
		})
	}
}
