package framework

import "testing"

// TestKubeletUnreachable: what kubectl exec prints when the API server cannot reach the
// kubelet, or a just restarted kubelet does not know the pod yet, is retried; an answer
// of the command or another refusal is not.
func TestKubeletUnreachable(t *testing.T) {
	tests := []struct {
		out  string
		want bool
	}{
		{`Error from server: error dialing backend: dial tcp 192.0.2.2:10250: connect: connection refused`, true},
		{`error: unable to upgrade connection: pod does not exist`, true},
		{`Error from server (InternalError): an error on the server ("unknown") has prevented the request from succeeding`, true},
		{`command terminated with exit code 1`, false},
		{`Error from server (NotFound): pods "x" not found`, false},
		{`Error from server (Forbidden): pods "x" is forbidden`, false},
	}
	for _, tc := range tests {
		if got := kubeletUnreachable(tc.out); got != tc.want {
			t.Errorf("kubeletUnreachable(%q) = %v, want %v", tc.out, got, tc.want)
		}
	}
}
