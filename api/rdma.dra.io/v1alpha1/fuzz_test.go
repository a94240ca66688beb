package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzDecodeConfig feeds arbitrary documents to DecodeConfig. Whatever it accepts must
// validate and default without panicking, and must survive a round trip through
// json.Marshal unchanged.
func FuzzDecodeConfig(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"}`,
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","charDevices":"management","ncclEnv":false,"gidIndex":3,"memlock":"64Gi"}`,
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndex":"none","memlock":"unlimited"}`,
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndex":1e2,"memlock":1.5e3}`,
		"apiVersion: rdma.dra.io/v1alpha1\nkind: RdmaConfig\ngidIndex: 300\nmemlock: 1.5Gi\n",
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","fabric":{"trafficClass":106,"pkey":"0x8001","addressFamily":"ipv6","adaptiveRouting":true},` +
			`"allowedFabric":{"serviceLevels":[3],"roceVersions":[2],"maxQPsPerConnection":4}}`,
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","x":1,"x":2}`,
		`[]`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := DecodeConfig(raw)
		if err != nil {
			if cfg != nil {
				t.Fatalf("error %v with a non-nil config", err)
			}
			return
		}
		valid := len(cfg.Validate(nil)) == 0
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", cfg, err)
		}
		again, err := DecodeConfig(out)
		if err != nil {
			t.Fatalf("decode own output %s: %v", out, err)
		}
		// An empty list and an absent one mean the same (nothing allowed, nothing
		// listed), and omitempty writes neither.
		if diff := cmp.Diff(cfg, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip through %s (-first +second):\n%s", out, diff)
		}
		merged := Merge(cfg)
		if valid && len(merged.Validate(nil)) > 0 {
			t.Fatalf("a valid config became invalid when merged: %v", merged.Validate(nil))
		}
	})
}
