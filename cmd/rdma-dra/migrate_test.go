package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMigrateCommand(t *testing.T) {
	tests := []struct {
		name               string
		cfg                migrateConfig
		stdin              string
		wantErr            string
		wantOut, wantNotes string
	}{
		{name: "shared from a file", cfg: migrateConfig{sharedFile: "../../pkg/migrate/testdata/shared-readme.json"},
			wantOut: "extendedResourceName: rdma/hca_shared_devices_a", wantNotes: "note: unit semantics"},
		{name: "sriov from stdin with a prefix", cfg: migrateConfig{sriovFile: "-", resourcePrefix: "example.com"},
			stdin:   `{"resourceList":[{"resourceName":"ib","isRdma":true,"selectors":{"linkTypes":["infiniband"]}}]}`,
			wantOut: "extendedResourceName: example.com/ib"},
		{name: "both", cfg: migrateConfig{sharedFile: "a", sriovFile: "b"}, wantErr: "exactly one of"},
		{name: "neither", wantErr: "exactly one of"},
		{name: "missing file", cfg: migrateConfig{sharedFile: "/nonexistent"}, wantErr: "read /nonexistent"},
		{name: "unreadable", cfg: migrateConfig{sharedFile: "-"}, stdin: "kind: Pod", wantErr: "input is a Pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runMigrate(&tt.cfg, strings.NewReader(tt.stdin), &out, &errOut)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), "---\napiVersion: rdma.dra.io/v1alpha1\nkind: RdmaPool\n") || !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout:\n%s", out.String())
			}
			if strings.Contains(out.String(), "note:") || !strings.Contains(errOut.String(), tt.wantNotes) {
				t.Errorf("notes belong on stderr only:\nstdout %s\nstderr %s", out.String(), errOut.String())
			}
		})
	}
}

func TestMigrateRegistered(t *testing.T) {
	cmd := newApp().Command("migrate")
	if cmd == nil {
		t.Fatal("rdma-dra has no migrate command")
	}
	for _, f := range cmd.Flags {
		if ev, ok := f.(interface{ GetEnvVars() []string }); !ok || len(ev.GetEnvVars()) == 0 {
			t.Errorf("flag %v has no environment variable", f.Names())
		}
	}
}
