package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
)

func TestAttached(t *testing.T) {
	const (
		pod   = "11111111-1111-4111-8111-111111111111"
		other = "22222222-2222-4222-8222-222222222222"
		claim = "33333333-3333-4333-8333-333333333333"
	)
	dir := attachmark.Dir(t.TempDir())
	if err := attachmark.Mark(dir, pod, claim); err != nil {
		t.Fatal(err)
	}
	withAnnotation := func(key, uid string) string {
		return fmt.Sprintf(`{"ociVersion":"1.2.0","id":"ctr-1","status":"creating","pid":42,"bundle":"/b","annotations":{%q:%q}}`, key, uid)
	}
	args := []string{"attached", "--dir", dir, "--claim", claim}
	tests := []struct {
		name    string
		args    []string
		stdin   string
		wantErr error
		wantMsg string
	}{
		{name: "containerd: attached", args: args, stdin: withAnnotation("io.kubernetes.cri.sandbox-uid", pod)},
		{name: "CRI-O: attached", args: args, stdin: withAnnotation("io.kubernetes.pod.uid", pod)},
		{name: "another pod of the claim, not attached yet", args: args, stdin: withAnnotation("io.kubernetes.cri.sandbox-uid", other),
			wantErr: errNotAttached, wantMsg: "claim " + claim + " in pod " + other},
		{name: "no pod UID: not checked", args: args, stdin: `{"ociVersion":"1.2.0","id":"ctr-1","status":"creating","pid":42}`},
		{name: "pod UID that is not a UUID", args: args, stdin: withAnnotation("io.kubernetes.cri.sandbox-uid", "../x"), wantMsg: "pod UID"},
		{name: "no claim", args: []string{"attached", "--dir", dir}, stdin: withAnnotation("io.kubernetes.cri.sandbox-uid", pod),
			wantErr: errUsage, wantMsg: "--dir and --claim are required"},
		{name: "extra argument", args: append(append([]string(nil), args...), "x"), wantErr: errUsage, wantMsg: "unexpected arguments"},
		{name: "bad state", args: args, stdin: "{", wantMsg: "decode container state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			err := run(ctx, tc.args, strings.NewReader(tc.stdin))
			if tc.wantErr == nil && tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %v %q", tc.wantErr, tc.wantMsg)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q lacks %q", err, tc.wantMsg)
			}
		})
	}
}
