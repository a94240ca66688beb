package plugin

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
)

// fakeReviewServer is an API server that knows one token, allowed to get /metrics; it
// returns a kubeconfig for it.
func fakeReviewServer(t *testing.T) string {
	t.Helper()
	// review decodes the request (client-go sends protobuf), lets answer fill in the
	// status and writes the object back as JSON.
	review := func(gv schema.GroupVersion, answer func(runtime.Object)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			answer(obj)
			out, err := runtime.Encode(scheme.Codecs.LegacyCodec(gv), obj)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /apis/authentication.k8s.io/v1/tokenreviews", review(authenticationv1.SchemeGroupVersion, func(obj runtime.Object) {
		tr := obj.(*authenticationv1.TokenReview)
		if tr.Spec.Token == "scraper" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "prometheus"}}
		}
	}))
	mux.Handle("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", review(authorizationv1.SchemeGroupVersion, func(obj runtime.Object) {
		sar := obj.(*authorizationv1.SubjectAccessReview)
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "prometheus" && na != nil && na.Path == "/metrics" && na.Verb == "get"
	}))
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: plugin}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, api.URL)
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestServeMetricsSecure runs the plugin's metrics server with --metrics-secure against
// an API server that answers the reviews: HTTPS, and only the allowed token is served.
func TestServeMetricsSecure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	cfg := Config{MetricsAddress: addr, KubeClient: cliflags.KubeClient{Kubeconfig: fakeReviewServer(t), QPS: DefaultKubeAPIQPS, Burst: DefaultKubeAPIBurst}, MetricsAuth: metricsauth.Config{Secure: true}}
	done := make(chan error, 1)
	go func() {
		done <- serveMetrics(ctx, cfg, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("rdma_dra_up 1\n"))
		}))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveMetrics: %v", err)
		}
	})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the certificate is self-signed
	}}
	get := func(token string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	// The server generates its certificate before it listens.
	var status int
	testwait.Poll(func() bool {
		status, err = get("scraper")
		return err == nil
	})
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET with the allowed token: %d, %v", status, err)
	}
	for token, want := range map[string]int{"": http.StatusUnauthorized, "made-up": http.StatusUnauthorized} {
		if status, err := get(token); err != nil || status != want {
			t.Errorf("GET with token %q: %d, %v; want %d", token, status, err, want)
		}
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + addr + "/metrics"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served")
		}
		_ = resp.Body.Close()
	}
}
