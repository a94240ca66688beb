package main

import (
	"testing"

	"github.com/urfave/cli/v2"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/plugin"
)

// TestEveryFlagHasAnEnvTwin keeps the project's rule for this binary.
func TestEveryFlagHasAnEnvTwin(t *testing.T) {
	for _, f := range newApp().Flags {
		if ev, ok := f.(interface{ GetEnvVars() []string }); !ok || len(ev.GetEnvVars()) == 0 {
			t.Errorf("flag %v has no environment variable", f.Names())
		}
	}
}

// TestDeviceMetadataRoot: the chart sets DEVICE_METADATA_ROOT to "" to keep the files in
// the data directory, which must not fall back to the default (a directory the chart then
// does not mount).
func TestDeviceMetadataRoot(t *testing.T) {
	tests := []struct {
		name string
		env  *string
		args []string
		want string
	}{
		{name: "default", want: plugin.DefaultDeviceMetadataRoot},
		{name: "empty in the environment", env: ptr.To(""), want: ""},
		{name: "from the environment", env: ptr.To("/run/m"), want: "/run/m"},
		{name: "flag", args: []string{"--device-metadata-root=/run/f"}, want: "/run/f"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != nil {
				t.Setenv("DEVICE_METADATA_ROOT", *tc.env)
			}
			v := &flagValues{}
			got := "<not run>"
			app := &cli.App{Flags: v.flags(), Action: func(*cli.Context) error {
				cfg, err := v.config()
				got = cfg.DeviceMetadataRoot
				return err
			}}
			if err := app.Run(append([]string{"rdma-dra-kubeletplugin"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("DeviceMetadataRoot = %q, want %q", got, tc.want)
			}
		})
	}
}
