package framework

import (
	"slices"
	"testing"
)

func TestRegisteredIn(t *testing.T) {
	const metrics = `# HELP plugin_manager_total_plugins [ALPHA] Number of plugins in Plugin Manager
# TYPE plugin_manager_total_plugins gauge
plugin_manager_total_plugins{socket_path="/var/lib/kubelet/plugins_registry/rdma.dra.io-old-reg.sock",state="actual_state_of_world"} 1
plugin_manager_total_plugins{socket_path="/var/lib/kubelet/plugins_registry/rdma.dra.io-new-reg.sock",state="desired_state_of_world"} 1
`
	tests := []struct {
		socket string
		want   bool
	}{
		{"rdma.dra.io-old-reg.sock", true},
		{"rdma.dra.io-new-reg.sock", false}, // seen by the watcher, not registered yet
		{"dra.io-old-reg.sock", false},
		{"rdma.dra.io-gone-reg.sock", false},
	}
	for _, tt := range tests {
		t.Run(tt.socket, func(t *testing.T) {
			if got := registeredIn(metrics, []string{"x-reg.sock", tt.socket}); got != tt.want {
				t.Errorf("registeredIn(%s) = %v, want %v", tt.socket, got, tt.want)
			}
		})
	}
}

// TestRegistrationSockets pins the names against those the helper
// (kubeletplugin.RollingUpdateRegistrarSocketFile, v0.37.1) gave this UID for a short, a
// long and a very long registry path.
func TestRegistrationSockets(t *testing.T) {
	got := registrationSockets("rdma.dra.io", "0b7b1c8e-4f52-4e59-9d8e-2f1d0c6a9b11")
	want := []string{
		"rdma.dra.io-0b7b1c8e-4f52-4e59-9d8e-2f1d0c6a9b11-reg.sock",
		"rdma.dra.io-7ljbNG8Tfgk-reg.sock",
		"dra-MCecSYFDjGWz9K55iphAfQ-reg.sock",
	}
	if !slices.Equal(got, want) {
		t.Errorf("registrationSockets = %q, want %q", got, want)
	}
}
