package plugin

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
)

func TestReadyFileFollowsRegistration(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	path := filepath.Join(t.TempDir(), "ready")
	reg := &fakeRegistration{}
	done := make(chan struct{})
	go func() {
		KeepReadyFile(ctx, path, reg)
		close(done)
	}()
	expect := func(ready bool, why string) {
		t.Helper()
		var err error
		if !testwait.Poll(func() bool { err = CheckReady(path); return (err == nil) == ready }) {
			t.Fatalf("%s: CheckReady = %v, want ready %v", why, err, ready)
		}
	}
	expect(false, "before the kubelet answered")
	if err := CheckReady(path); err == nil || !strings.Contains(err.Error(), "not registered with the kubelet yet") {
		t.Errorf("CheckReady before registration: %v", err)
	}
	reg.registered.Store(true)
	expect(true, "registered")
	reg.registered.Store(false)
	expect(false, "refused")
	reg.registered.Store(true)
	expect(true, "registered again")
	cancel()
	<-done
	if err := CheckReady(path); err == nil {
		t.Error("the ready file outlived the plugin")
	}
	if err := CheckReady(""); err == nil {
		t.Error("CheckReady without a file succeeded")
	}
}
