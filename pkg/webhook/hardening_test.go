package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// decide runs one review through ServeHTTP and returns the response.
func decide(t *testing.T, v *Validator, body string) *admissionv1.AdmissionResponse {
	t.Helper()
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(rec.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("decode response: %v %+v", err, out)
	}
	return out.Response
}

// TestReviewBoundsFieldsBeforeParsing: a memlock of five thousand digits is refused by
// its length, before the quantity parser (whose cost grows faster than the input) sees
// it, and a document over the API's limit for opaque parameters is refused whole. The
// long memlock is zeros ahead of a valid limit, which the parser would accept: only the
// bound refuses it.
func TestReviewBoundsFieldsBeforeParsing(t *testing.T) {
	v := &Validator{DriverName: "rdma.dra.io"}
	for _, tt := range []struct {
		name, params, want string
	}{
		{"long memlock", `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"` + strings.Repeat("0", 5000) + `1Ki"}`,
			"spec.devices.config[1].opaque.parameters.memlock: Too long"},
		{"long gidIndex", `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndex":"` + strings.Repeat("1", 5000) + `"}`,
			"spec.devices.config[1].opaque.parameters.gidIndex: Too long"},
		{"long document", `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"` + strings.Repeat("9", 100000) + `"}`,
			"at most 10240 are allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := decide(t, v, review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("rdma.dra.io", tt.params)))
			var msg string
			if r.Result != nil {
				msg = r.Result.Message
			}
			if r.Allowed || !strings.Contains(msg, tt.want) {
				t.Errorf("allowed %v, message %q, want %q", r.Allowed, msg, tt.want)
			}
			if len(msg) > 2048 {
				t.Errorf("message of %d bytes quotes the value back", len(msg))
			}
		})
	}
}

// classes is a fake DeviceClass getter.
func classes(cs ...*resourceapi.DeviceClass) func(string) (*resourceapi.DeviceClass, error) {
	return func(name string) (*resourceapi.DeviceClass, error) {
		for _, c := range cs {
			if c.Name == name {
				return c, nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
	}
}

func classWithConfig(name, params string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
		Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: "rdma.dra.io", Parameters: runtime.RawExtension{Raw: []byte(params)}}}}}}}
}

// TestReviewEnforcesClassLimits: a claim's config may not set the admin limits, and may
// not ask for more than the limits of the DeviceClass its request names.
func TestReviewEnforcesClassLimits(t *testing.T) {
	v := &Validator{DriverName: "rdma.dra.io", Class: classes(classWithConfig("rdma-shared",
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","allowedCharDevices":"verbs","maxMemlock":"64Gi"}`))}
	const head = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"`
	for _, tt := range []struct {
		name, params, want string
	}{
		{"within the limits", head + `,"charDevices":"verbs","memlock":"32Gi"}`, ""},
		{"management on a verbs-only class", head + `,"charDevices":"management"}`,
			`spec.devices.config[1].opaque.parameters.charDevices: Forbidden: "management" exceeds the DeviceClass's allowedCharDevices "verbs" (DeviceClass rdma-shared)`},
		{"unlimited memlock under a cap", head + `,"memlock":"unlimited"}`,
			`spec.devices.config[1].opaque.parameters.memlock: Forbidden: "unlimited" exceeds the DeviceClass's maxMemlock "64Gi"`},
		{"more memlock than the cap", head + `,"memlock":"65Gi"}`, `parameters.memlock: Forbidden`},
		{"a claim sets a limit", head + `,"allowedCharDevices":"management"}`,
			`spec.devices.config[1].opaque.parameters.allowedCharDevices: Forbidden: is an admin limit: only a DeviceClass config may set it`},
		{"a claim lifts the memlock cap", head + `,"maxMemlock":"unlimited"}`, `parameters.maxMemlock: Forbidden`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := decide(t, v, review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("rdma.dra.io", tt.params)))
			if r.Allowed != (tt.want == "") || (tt.want != "" && !strings.Contains(r.Result.Message, tt.want)) {
				t.Errorf("allowed %v, result %+v\nwant %q", r.Allowed, r.Result, tt.want)
			}
		})
	}
	// A DeviceClass may set both, and its own values must keep them.
	r := decide(t, v, review("resource.k8s.io", "v1", "DeviceClass", "CREATE",
		`{"metadata":{"name":"d"},"spec":{"config":[{"opaque":{"driver":"rdma.dra.io","parameters":`+head+`,"allowedCharDevices":"verbs","charDevices":"diagnostics"}}}]}}`))
	if r.Allowed || !strings.Contains(r.Result.Message, `spec.config[0].opaque.parameters.charDevices: Forbidden`) {
		t.Errorf("class beyond its own limit: %+v", r.Result)
	}
}

// TestNewServerBoundsConnections: the webhook's server has every timeout and a header
// limit, reads and queues a review within the API server's timeout, and its handler is
// the limited validator.
func TestNewServerBoundsConnections(t *testing.T) {
	srv := NewServer(context.Background(), ":0", &Validator{DriverName: "rdma.dra.io"}, nil)
	if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 || srv.MaxHeaderBytes == 0 {
		t.Errorf("unbounded server: %+v", srv)
	}
	// The chart's webhook.timeoutSeconds.
	const apiServerTimeout = 5 * time.Second
	if ReadTimeout+SlotWait >= apiServerTimeout || srv.ReadTimeout != ReadTimeout {
		t.Errorf("a review may take %s to read and %s to wait for a slot: not within the API server's %s",
			srv.ReadTimeout, SlotWait, apiServerTimeout)
	}
	if MaxBody > 8<<20 || MaxBody < 6<<20 {
		t.Errorf("MaxBody %d is not what the API server can send (two 3 MiB objects and metadata)", MaxBody)
	}
	rec := httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader(
		review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("rdma.dra.io", goodConfig)))))
	if rec.Code != http.StatusOK {
		t.Errorf("HTTP %d through the server's handler", rec.Code)
	}
}

// TestCARotationPublishesBothCAs: when the CA is replaced, the caBundle holds the new
// CA and the old one, because other replicas serve certificates of the old CA until
// their next check; a replica that restarts later keeps both.
func TestCARotationPublishesBothCAs(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	m, client := newCertManager(now)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	oldCA := secretData(t, client)[SecretCAKey]

	// Nine and a half years later the CA has less than a certificate's lifetime left.
	m.Now = func() time.Time { return now.Add(9*365*24*time.Hour + 200*24*time.Hour) }
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	newCA := secretData(t, client)[SecretCAKey]
	if bytes.Equal(oldCA, newCA) {
		t.Fatal("the CA was not replaced")
	}
	check := func(when string) {
		t.Helper()
		cfg, _ := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "rdma-webhook", metav1.GetOptions{})
		for _, w := range cfg.Webhooks {
			certs := pemCerts(w.ClientConfig.CABundle)
			if len(certs) != 2 || !bytes.Equal(certs[0], pemCerts(newCA)[0]) || !bytes.Equal(certs[1], pemCerts(oldCA)[0]) {
				t.Errorf("%s: webhook %s trusts %d CAs, want the new and the old one", when, w.Name, len(certs))
			}
		}
	}
	check("after rotation")

	// Another replica (or a restart) with the same Secret keeps both.
	m2, _ := newCertManager(m.now())
	m2.Client = client
	if err := m2.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	check("another replica")

	// Once the old CA has expired, only the new one is trusted.
	m2.Now = func() time.Time { return now.Add(10*365*24*time.Hour + 24*time.Hour) }
	if err := m2.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, _ := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "rdma-webhook", metav1.GetOptions{})
	if n := len(pemCerts(cfg.Webhooks[0].ClientConfig.CABundle)); n != 1 {
		t.Errorf("after the old CA expired the bundle has %d CAs", n)
	}
}

func pemCerts(data []byte) [][]byte {
	var out [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		out = append(out, b.Bytes)
	}
}

// FuzzServeHTTP feeds arbitrary bodies through the webhook's whole request path:
// decoding the AdmissionReview, dispatching on the kind, decoding and validating the
// object and its configs, and writing the response. Whatever comes in, the answer is a
// 400 or an AdmissionReview whose response echoes the request's UID; while fuzzing
// (not when go test runs the seeds as a unit test), also within a time that does not
// grow with tricks in the input.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []string{
		review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("rdma.dra.io", goodConfig)),
		review("resource.k8s.io", "v1", "ResourceClaim", "UPDATE", claim("rdma.dra.io", `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"99999999999999999999999Ki","charDevices":"management"}`)),
		review("resource.k8s.io", "v1", "ResourceClaimTemplate", "CREATE", `{"spec":{"spec":{"devices":{"requests":[{"name":"r","firstAvailable":[{"name":"a","deviceClassName":"rdma-shared"}]}],"config":[{"requests":["r/a"],"opaque":{"driver":"rdma.dra.io","parameters":{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","allowedCharDevices":"verbs"}}}]}}}}`),
		review("resource.k8s.io", "v1", "DeviceClass", "CREATE", `{"spec":{"config":[{"opaque":{"driver":"rdma.dra.io","parameters":{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","maxMemlock":"1Gi","memlock":"2Gi"}}}]}}`),
		review("rdma.dra.io", "v1alpha1", "RdmaPool", "CREATE", `{"metadata":{"name":"p"},"spec":{"mode":"shared","cel":"false) || (true","selectors":{"ifNames":["ib*"]}}}`),
		`{"request":{"uid":"x","kind":{"group":"resource.k8s.io","version":"v1","kind":"ResourceClaim"},"operation":"CREATE","object":{"spec":{"devices":7}}}}`,
		`{`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	v := &Validator{DriverName: "rdma.dra.io", Class: classes(classWithConfig("rdma-shared",
		`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","allowedCharDevices":"verbs","maxMemlock":"64Gi"}`))}
	// The time bound is the fuzzer's oracle for inputs that are slow to refuse; a unit
	// test asserts no wall-clock time (the bounds it is about are checked exactly by
	// TestReviewBoundsFieldsBeforeParsing).
	fuzzing := flag.Lookup("test.fuzz").Value.String() != ""
	f.Fuzz(func(t *testing.T, body []byte) {
		start := time.Now()
		rec := httptest.NewRecorder()
		v.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		if d := time.Since(start); fuzzing && d > 2*time.Second {
			t.Errorf("a review of %d bytes took %s", len(body), d)
		}
		switch rec.Code {
		case http.StatusBadRequest:
			return
		case http.StatusOK:
		default:
			t.Fatalf("HTTP %d", rec.Code)
		}
		var in, out admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
			t.Fatalf("answered 200 to a body that is not a review: %v", err)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("response is not a review: %v %s", err, rec.Body)
		}
		if out.Response.UID != in.Request.UID {
			t.Errorf("UID %q, want %q", out.Response.UID, in.Request.UID)
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
			t.Error("denied without a message")
		}
	})
}
