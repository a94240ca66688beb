package plugin

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type fakeRegistration struct{ registered atomic.Bool }

func (f *fakeRegistration) RegistrationStatus() *registerapi.RegistrationStatus {
	return &registerapi.RegistrationStatus{PluginRegistered: f.registered.Load()}
}

// TestLivenessHandler: /healthz is 503 until the kubelet accepted the registration and
// 200 after; nothing else is served. The chart's probe is an HTTP GET on 127.0.0.1, where
// the port is bound (deployments: TestKubeletPluginDaemonSet).
func TestLivenessHandler(t *testing.T) {
	reg := &fakeRegistration{}
	h := livenessHandler(reg)
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if code := get(LivenessPath); code != http.StatusServiceUnavailable {
		t.Errorf("before registration: HTTP %d", code)
	}
	reg.registered.Store(true)
	if code := get(LivenessPath); code != http.StatusOK {
		t.Errorf("registered: HTTP %d", code)
	}
	if code := get("/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the liveness port: HTTP %d", code)
	}
}
