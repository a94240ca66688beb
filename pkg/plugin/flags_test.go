package plugin

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// defaultValue returns a flag's default as the command line spells it and as the
// startup log shows it.
func defaultValue(t *testing.T, f cli.Flag) (text string, logged any) {
	t.Helper()
	switch f := f.(type) {
	case *cli.StringFlag:
		return f.Value, f.Value
	case *cli.IntFlag:
		return strconv.Itoa(f.Value), f.Value
	case *cli.Float64Flag:
		return strconv.FormatFloat(f.Value, 'g', -1, 64), f.Value
	case *cli.BoolFlag:
		return strconv.FormatBool(f.Value), f.Value
	case *cli.DurationFlag:
		return f.Value.String(), f.Value
	case *cli.GenericFlag:
		if f.Name == "node-ips" {
			return "", []string(nil)
		}
	}
	t.Fatalf("flag %s: no default for %T", f.Names()[0], f)
	return "", nil
}

// otherValue returns, for a flag, a value other than its default as the command line
// and the environment spell it, and as the startup log shows it.
func otherValue(t *testing.T, f cli.Flag) (text string, logged any) {
	t.Helper()
	switch f := f.(type) {
	case *cli.StringFlag:
		return "/other/" + f.Name, "/other/" + f.Name
	case *cli.IntFlag:
		return strconv.Itoa(f.Value + 7), f.Value + 7
	case *cli.Float64Flag:
		return strconv.FormatFloat(f.Value+0.5, 'g', -1, 64), f.Value + 0.5
	case *cli.BoolFlag:
		return strconv.FormatBool(!f.Value), !f.Value
	case *cli.DurationFlag:
		return (f.Value + 7*time.Second).String(), f.Value + 7*time.Second
	case *cli.GenericFlag:
		if f.Name == "node-ips" {
			return "10.0.0.1, fd00::1,", []string{"10.0.0.1", "fd00::1"}
		}
	}
	t.Fatalf("flag %s: no other value for %T", f.Names()[0], f)
	return "", nil
}

// TestFlagsReachConfigAndLog gives every declared flag a value other than its default,
// on the command line and through its environment twin, and then its default spelled
// out, and finds each in the startup log line under the flag's key: the log is derived
// from the declared flags, and every flag is bound to Config.
func TestFlagsReachConfigAndLog(t *testing.T) {
	for _, source := range []string{"command line", "environment", "defaults given"} {
		t.Run(source, func(t *testing.T) {
			cfg := &Config{}
			flags := Flags(cfg)
			args := []string{"rdma-dra-kubeletplugin"}
			want := map[string]any{}
			for _, f := range flags {
				text, logged := otherValue(t, f)
				if source == "defaults given" {
					text, logged = defaultValue(t, f)
				}
				name := f.Names()[0]
				want[cliflags.LogKey(name)] = logged
				if source == "environment" {
					t.Setenv(f.(cli.DocGenerationFlag).GetEnvVars()[0], text)
				} else {
					args = append(args, "--"+name+"="+text)
				}
			}
			app := &cli.App{Flags: flags, Action: func(*cli.Context) error { return nil }}
			if err := app.Run(args); err != nil {
				t.Fatal(err)
			}
			kv := cfg.KeysAndValues()
			got := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				key := kv[i].(string)
				if _, dup := got[key]; dup {
					t.Errorf("key %s twice in the startup log", key)
				}
				got[key] = kv[i+1]
			}
			for key, w := range want {
				if g, ok := got[key]; !ok || fmt.Sprint(g) != fmt.Sprint(w) {
					t.Errorf("startup log %s=%v (present %v), want %v", key, g, ok, w)
				}
			}
			for _, derived := range []string{"version", "dataDir", "rollingUpdate", "deviceMetadataDir", "useNetlink", "prepareHoldFile"} {
				if _, ok := got[derived]; !ok {
					t.Errorf("startup log lacks %s", derived)
				}
			}
		})
	}
}

// TestFlagDefaultsAreValid: the defaults with a node name are a configuration that
// Validate accepts, and resolve to what the docs promise.
func TestFlagDefaultsAreValid(t *testing.T) {
	cfg := &Config{}
	app := &cli.App{Flags: Flags(cfg), Action: func(*cli.Context) error { return nil }}
	if err := app.Run([]string{"rdma-dra-kubeletplugin", "--node-name=n"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"model auto", cfg.Model == publish.ModelAuto},
		{"netlink on /sys", cfg.UseNetlink()},
		{"kubelet's QPS", cfg.KubeClient.QPS == DefaultKubeAPIQPS && cfg.KubeClient.Burst == DefaultKubeAPIBurst},
		{"no node IPs", len(cfg.NodeIPs) == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("defaults: want %s, got %+v", c.what, *cfg)
		}
	}
}

// TestNodeIPsFlag: NODE_IPS as the downward API gives it, status.hostIP (one address)
// or status.hostIPs (every node IP, comma-separated, primary first), and as an admin may
// write it, reaches Config and parses into the node's addresses.
func TestNodeIPsFlag(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  []string
	}{
		{"status.hostIP", "10.0.0.1", []string{"10.0.0.1"}},
		{"status.hostIPs dual-stack", "10.0.0.1,fd00::1", []string{"10.0.0.1", "fd00::1"}},
		{"status.hostIPs IPv6 primary", "fd00::1,10.0.0.1", []string{"fd00::1", "10.0.0.1"}},
		{"blanks and a trailing comma", " 10.0.0.1 , fd00::1 ,", []string{"10.0.0.1", "fd00::1"}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NODE_IPS", tc.value)
			cfg := &Config{}
			app := &cli.App{Flags: Flags(cfg), Action: func(*cli.Context) error { return nil }}
			if err := app.Run([]string{"rdma-dra-kubeletplugin", "--node-name=n"}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(cfg.NodeIPs) != fmt.Sprint(tc.want) {
				t.Errorf("NodeIPs %q, want %q", cfg.NodeIPs, tc.want)
			}
			ips, err := parseNodeIPs(cfg.NodeIPs)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ips); got != fmt.Sprint(tc.want) {
				t.Errorf("node IPs %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := parseNodeIPs([]string{"10.0.0.1", "node-a"}); err == nil || err.Error() != `--node-ips: "node-a" is not an IP address` {
		t.Errorf("error %v, want the bad address named", err)
	}
}
