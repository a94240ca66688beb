package plugin

import (
	"context"
	"testing"
)

// TestListenSharedTwice is the rolling update on the host network: the new instance binds
// the port the old one still holds.
func TestListenSharedTwice(t *testing.T) {
	ctx := context.Background()
	first, err := listenShared(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := listenShared(ctx, first.Addr().String())
	if err != nil {
		t.Fatalf("second listener on %s: %v", first.Addr(), err)
	}
	second.Close()
}
