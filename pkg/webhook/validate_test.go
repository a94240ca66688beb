package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// review wraps an object in an AdmissionReview request as the API server sends it.
func review(group, version, kind, operation, object string) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{` +
		`"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",` +
		`"kind":{"group":"` + group + `","version":"` + version + `","kind":"` + kind + `"},` +
		`"resource":{"group":"` + group + `","version":"` + version + `","resource":"x"},` +
		`"operation":"` + operation + `","object":` + object + `}}`
}

const (
	goodConfig = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndex":3}`
	badConfig  = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndex":300}`
)

func claim(driver, params string) string {
	return `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},"spec":{"devices":{` +
		`"requests":[{"name":"r","exactly":{"deviceClassName":"rdma-shared"}}],` +
		`"config":[{"opaque":{"driver":"gpu.example.com","parameters":{"any":"thing"}}},{"requests":["r"],"opaque":{"driver":"` + driver + `","parameters":` + params + `}}]}}}`
}

func TestReview(t *testing.T) {
	tests := []struct {
		name, body  string
		wantAllowed bool
		wantCode    int32
		wantMessage string
	}{
		{"claim with a valid config", review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("rdma.dra.io", goodConfig)), true, 0, ""},
		{"claim with an invalid config", review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("rdma.dra.io", badConfig)), false, 422,
			`spec.devices.config[1].opaque.parameters.gidIndex: Invalid value: "300": must be auto, none or a number from 0 to 255`},
		{"claim with an unknown field", review("resource.k8s.io", "v1", "ResourceClaim", "UPDATE",
			claim("rdma.dra.io", `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIdx":3}`)), false, 422,
			`spec.devices.config[1].opaque.parameters: Invalid value: "{\"apiVersion\":\"rdma.dra.io/v1alpha1\",\"kind\":\"RdmaConfig\",\"gidIdx\":3}": decode RdmaConfig: unknown field "gidIdx"`},
		{"another driver's config is not ours to judge", review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("gpu.example.com", badConfig)), true, 0, ""},
		{"template", review("resource.k8s.io", "v1", "ResourceClaimTemplate", "CREATE",
			`{"metadata":{"name":"t"},"spec":{"spec":{"devices":{"config":[{"opaque":{"driver":"rdma.dra.io","parameters":{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"lots"}}}]}}}}`),
			false, 422, `spec.spec.devices.config[0].opaque.parameters.memlock: Invalid value: "lots"`},
		{"device class", review("resource.k8s.io", "v1", "DeviceClass", "CREATE",
			`{"metadata":{"name":"d"},"spec":{"config":[{"opaque":{"driver":"rdma.dra.io","parameters":{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","charDevices":"all"}}}]}}`),
			false, 422, `spec.config[0].opaque.parameters.charDevices: Unsupported value: "all"`},
		{"pool", review("rdma.dra.io", "v1alpha1", "RdmaPool", "CREATE",
			`{"metadata":{"name":"p"},"spec":{"mode":"shared","selectors":{"ifNames":["ib["]},"config":`+badConfig+`}}`),
			false, 422, `[spec.selectors.ifNames[0]: Invalid value: "ib[": must be a name or a valid shell pattern (*, ?, [a-z]), spec.config.gidIndex: Invalid value: "300"`},
		{"valid pool", review("rdma.dra.io", "v1alpha1", "RdmaPool", "CREATE",
			`{"metadata":{"name":"p"},"spec":{"mode":"shared","extendedResourceName":"rdma/hca_shared_devices_a","config":`+goodConfig+`}}`), true, 0, ""},
		{"legacy pool", review("rdma.dra.io", "v1alpha1", "RdmaPool", "CREATE",
			`{"metadata":{"name":"hca-shared-devices-a"},"spec":{"mode":"legacy","selectors":{},"extendedResourceName":"rdma/hca_shared_devices_a","config":`+goodConfig+`}}`),
			true, 0, ""},
		{"legacy pool with selectors", review("rdma.dra.io", "v1alpha1", "RdmaPool", "CREATE",
			`{"metadata":{"name":"hca-shared-devices-a"},"spec":{"mode":"legacy","selectors":{"ifNames":["ib*"]}}}`),
			false, 422, `spec.selectors: Forbidden: must be empty in legacy mode: the node configuration's legacyResources entry named after the pool selects its ports`},
		{"legacy pool with a long name", review("rdma.dra.io", "v1alpha1", "RdmaPool", "CREATE",
			`{"metadata":{"name":"`+strings.Repeat("a", 57)+`"},"spec":{"mode":"legacy"}}`),
			false, 422, `metadata.name: Invalid value: "` + strings.Repeat("a", 57) + `": must be a DNS label of at most 56 characters in legacy mode`},
		{"legacy pool that attaches a network", review("rdma.dra.io", "v1alpha1", "RdmaPool", "UPDATE",
			`{"metadata":{"name":"hca-shared-devices-a"},"spec":{"mode":"legacy","config":{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"macvlan","ipam":"node"}}}}`),
			false, 422, `spec.config.network: Forbidden: must not be set in legacy mode: a legacy pool's device stands for several ports and has no single netdev to attach`},
		{"delete is allowed", review("resource.k8s.io", "v1", "ResourceClaim", "DELETE", "null"), true, 0, ""},
		{"unknown kind is allowed", review("", "v1", "Pod", "CREATE", `{"metadata":{"name":"p"}}`), true, 0, ""},
		{"undecodable object", review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", `{"spec":{"devices":7}}`), false, 400, "decode ResourceClaim"},
	}
	v := &Validator{DriverName: "rdma.dra.io"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			v.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader(tt.body)))
			if rec.Code != http.StatusOK {
				t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
			}
			var out admissionv1.AdmissionReview
			if err := json.NewDecoder(rec.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
				t.Fatalf("response %+v", out)
			}
			r := out.Response
			if r.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
				t.Errorf("uid %q not echoed", r.UID)
			}
			if r.Allowed != tt.wantAllowed {
				t.Fatalf("allowed %v, want %v (%+v)", r.Allowed, tt.wantAllowed, r.Result)
			}
			if !tt.wantAllowed && (r.Result.Code != tt.wantCode || !strings.Contains(r.Result.Message, tt.wantMessage)) {
				t.Errorf("result %d %q\nwant %d containing %q", r.Result.Code, r.Result.Message, tt.wantCode, tt.wantMessage)
			}
		})
	}
}

func TestServeHTTPRejectsBadRequests(t *testing.T) {
	v := &Validator{DriverName: "rdma.dra.io"}
	for _, tt := range []struct {
		name, method, body string
		want               int
	}{
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"not JSON", http.MethodPost, "{", http.StatusBadRequest},
		{"no request", http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
		{"too large", http.MethodPost, string(bytes.Repeat([]byte(" "), MaxBody+1)), http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			v.ServeHTTP(rec, httptest.NewRequest(tt.method, Path, strings.NewReader(tt.body)))
			if rec.Code != tt.want {
				t.Errorf("HTTP %d, want %d", rec.Code, tt.want)
			}
		})
	}
}
