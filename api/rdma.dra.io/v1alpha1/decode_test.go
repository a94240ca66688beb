package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

const header = `"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"`

// userError is what a user sees for a config: the decode error, or else the
// validation errors of the decoded config.
func userError(raw string) string {
	cfg, err := DecodeConfig([]byte(raw))
	if err != nil {
		return err.Error()
	}
	if err := cfg.Validate(nil).ToAggregate(); err != nil {
		return err.Error()
	}
	return ""
}

func TestBadConfigs(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"empty", "  \n", "decode RdmaConfig: empty document"},
		{"not an object", `[1]`, "decode RdmaConfig: not an object"},
		{"yaml scalar", `just text`, "decode RdmaConfig: not an object"},
		{"truncated", `{` + header + `,`, "decode RdmaConfig: unexpected end of JSON input"},
		{"no apiVersion", `{"kind":"RdmaConfig"}`, `decode RdmaConfig: apiVersion is missing, want "rdma.dra.io/v1alpha1"`},
		{"wrong group", `{"apiVersion":"gpu.example.com/v1alpha1","kind":"RdmaConfig"}`,
			`decode RdmaConfig: apiVersion "gpu.example.com/v1alpha1" is not supported, want "rdma.dra.io/v1alpha1"`},
		{"wrong version", `{"apiVersion":"rdma.dra.io/v1","kind":"RdmaConfig"}`,
			`decode RdmaConfig: apiVersion "rdma.dra.io/v1" is not supported, want "rdma.dra.io/v1alpha1"`},
		{"no kind", `{"apiVersion":"rdma.dra.io/v1alpha1"}`, `decode RdmaConfig: kind is missing, want "RdmaConfig"`},
		{"wrong kind", `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaPool"}`,
			`decode RdmaConfig: kind "RdmaPool" is not supported, want "RdmaConfig"`},
		{"unknown field", `{` + header + `,"gidIdx":3}`, `decode RdmaConfig: unknown field "gidIdx"`},
		{"wrong case", `{` + header + `,"NCCLEnv":true}`, `decode RdmaConfig: unknown field "NCCLEnv"`},
		{"two unknown fields", `{` + header + `,"a":1,"b":2}`, "decode RdmaConfig: unknown field \"a\"\nunknown field \"b\""},
		{"duplicate field", `{` + header + `,"memlock":"1Gi","memlock":"2Gi"}`, `decode RdmaConfig: duplicate field "memlock"`},
		{"yaml unknown field", "apiVersion: rdma.dra.io/v1alpha1\nkind: RdmaConfig\nnccl: true\n", `decode RdmaConfig: unknown field "nccl"`},
		{"yaml duplicate key", "apiVersion: rdma.dra.io/v1alpha1\nkind: RdmaConfig\nmemlock: 1Gi\nmemlock: 2Gi\n",
			`decode RdmaConfig: yaml: unmarshal errors:` + "\n" + `  line 4: key "memlock" already set in map`},
		{"ncclEnv not a bool", `{` + header + `,"ncclEnv":"yes"}`,
			"decode RdmaConfig: json: cannot unmarshal string into Go struct field RdmaConfig.ncclEnv of type bool"},
		{"charDevices not a string", `{` + header + `,"charDevices":2}`,
			"decode RdmaConfig: json: cannot unmarshal number into Go struct field RdmaConfig.charDevices of type v1alpha1.CharDeviceSet"},
		{"charDevices unknown", `{` + header + `,"charDevices":"all"}`,
			`charDevices: Unsupported value: "all": supported values: "verbs", "diagnostics", "management"`},
		{"gidIndex too large", `{` + header + `,"gidIndex":300}`,
			`gidIndex: Invalid value: "300": must be auto, none or a number from 0 to 255`},
		{"gidIndex negative", `{` + header + `,"gidIndex":-1}`,
			`gidIndex: Invalid value: "-1": must be auto, none or a number from 0 to 255`},
		{"gidIndex fraction", `{` + header + `,"gidIndex":1.5}`,
			`gidIndex: Invalid value: "1.5": must be auto, none or a number from 0 to 255`},
		{"gidIndex leading zero", `{` + header + `,"gidIndex":"03"}`,
			`gidIndex: Invalid value: "03": must be auto, none or a number from 0 to 255`},
		{"gidIndex word", `{` + header + `,"gidIndex":"Auto"}`,
			`gidIndex: Invalid value: "Auto": must be auto, none or a number from 0 to 255`},
		{"gidIndex bool", `{` + header + `,"gidIndex":true}`,
			`gidIndex: Invalid value: "true": must be auto, none or a number from 0 to 255`},
		{"memlock zero", `{` + header + `,"memlock":0}`,
			`memlock: Invalid value: "0": must be unset, unlimited or a positive whole number of bytes such as 64Gi`},
		{"memlock milli", `{` + header + `,"memlock":"100m"}`,
			`memlock: Invalid value: "100m": must be unset, unlimited or a positive whole number of bytes such as 64Gi`},
		{"memlock negative", `{` + header + `,"memlock":"-1Gi"}`,
			`memlock: Invalid value: "-1Gi": must be unset, unlimited or a positive whole number of bytes such as 64Gi`},
		{"memlock beyond int64", `{` + header + `,"memlock":"9Ei"}`,
			`memlock: Invalid value: "9Ei": must be unset, unlimited or a positive whole number of bytes such as 64Gi`},
		{"memlock object", `{` + header + `,"memlock":{"bytes":1}}`,
			`memlock: Invalid value: "{\"bytes\":1}": must be unset, unlimited or a positive whole number of bytes such as 64Gi`},
		{"three bad values", `{` + header + `,"charDevices":"","gidIndex":"x","memlock":"lots"}`,
			`[charDevices: Unsupported value: "": supported values: "verbs", "diagnostics", "management", ` +
				`gidIndex: Invalid value: "x": must be auto, none or a number from 0 to 255, ` +
				`memlock: Invalid value: "lots": must be unset, unlimited or a positive whole number of bytes such as 64Gi]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := userError(tc.raw); got != tc.want {
				t.Errorf("error:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestValidateFieldPath(t *testing.T) {
	cfg, err := DecodeConfig([]byte(`{` + header + `,"gidIndex":256}`))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Validate(field.NewPath("spec", "devices", "config").Index(1).Child("opaque", "parameters")).ToAggregate().Error()
	want := `spec.devices.config[1].opaque.parameters.gidIndex: Invalid value: "256": must be auto, none or a number from 0 to 255`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestGoodConfigs(t *testing.T) {
	tm := func(c RdmaConfig) RdmaConfig {
		c.APIVersion, c.Kind = "rdma.dra.io/v1alpha1", RdmaConfigKind
		return c
	}
	gid := func(s string) *GIDIndexPolicy { p := GIDIndexPolicy(s); return &p }
	mem := func(s string) *MemlockPolicy { p := MemlockPolicy(s); return &p }
	tests := []struct {
		name string
		raw  string
		want RdmaConfig
		// index and bytes are what the accessors return for the decoded policies.
		index    int
		hasIndex bool
		bytes    int64
		hasBytes bool
	}{
		{name: "header only", raw: `{` + header + `}`, want: tm(RdmaConfig{})},
		{name: "all fields json", raw: `{` + header + `,"charDevices":"management","ncclEnv":false,"gidIndex":3,"memlock":68719476736}`,
			want:  tm(RdmaConfig{CharDevices: ptr.To(CharDevicesManagement), NCCLEnv: ptr.To(false), GIDIndex: gid("3"), Memlock: mem("68719476736")}),
			index: 3, hasIndex: true, bytes: 64 << 30, hasBytes: true},
		{name: "gidIndex as string", raw: `{` + header + `,"gidIndex":"255"}`,
			want: tm(RdmaConfig{GIDIndex: gid("255")}), index: 255, hasIndex: true},
		{name: "named policies", raw: `{` + header + `,"gidIndex":"none","memlock":"unlimited"}`,
			want: tm(RdmaConfig{GIDIndex: ptr.To(GIDIndexNone), Memlock: ptr.To(MemlockUnlimited)})},
		{name: "yaml quantity", raw: "apiVersion: rdma.dra.io/v1alpha1\nkind: RdmaConfig\ncharDevices: verbs\ngidIndex: 0\nmemlock: 1.5Gi\n",
			want:  tm(RdmaConfig{CharDevices: ptr.To(CharDevicesVerbs), GIDIndex: gid("0"), Memlock: mem("1.5Gi")}),
			index: 0, hasIndex: true, bytes: 3 << 29, hasBytes: true},
		{name: "null means unset", raw: `{` + header + `,"gidIndex":null,"memlock":null}`, want: tm(RdmaConfig{})},
		{name: "decimal quantity", raw: `{` + header + `,"memlock":"2G"}`,
			want: tm(RdmaConfig{Memlock: mem("2G")}), bytes: 2e9, hasBytes: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeConfig([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
			if errs := got.Validate(nil); len(errs) > 0 {
				t.Errorf("valid config refused: %v", errs)
			}
			if got.GIDIndex != nil {
				if n, ok := got.GIDIndex.Index(); n != tc.index || ok != tc.hasIndex {
					t.Errorf("Index() = %d, %v; want %d, %v", n, ok, tc.index, tc.hasIndex)
				}
			}
			if got.Memlock != nil {
				if n, ok := got.Memlock.Bytes(); n != tc.bytes || ok != tc.hasBytes {
					t.Errorf("Bytes() = %d, %v; want %d, %v", n, ok, tc.bytes, tc.hasBytes)
				}
			}
			// What we write reads back the same, numbers staying numbers.
			out, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeConfig(out)
			if err != nil {
				t.Fatalf("decode %s: %v", out, err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("round trip through %s (-first +second):\n%s", out, diff)
			}
		})
	}
}

func TestMarshalKeepsNumbers(t *testing.T) {
	cfg := RdmaConfig{GIDIndex: ptr.To(GIDIndexPolicy("3")), Memlock: ptr.To(MemlockPolicy("64Gi"))}
	cfg.Default()
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"RdmaConfig","apiVersion":"rdma.dra.io/v1alpha1","charDevices":"diagnostics","ncclEnv":true,"gidIndex":3,"memlock":"64Gi","network":{"mode":"none","ipam":"none","keepHostAddress":false,"socketInterface":false}}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}
