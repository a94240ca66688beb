package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
)

// TestAttachmentMarks follows the mark that lets a pod's containers start (the CDI
// spec's createRuntime hook waits for it): written once every device of the claim is
// attached into the pod, never after an interrupted attach, again by the next process
// that completes it, and removed before a detach and at unprepare.
func TestAttachmentMarks(t *testing.T) {
	const (
		podA = "aaaaaaaa-0000-4000-8000-00000000000a"
		podB = "bbbbbbbb-0000-4000-8000-00000000000b"
	)
	h := newHarness(t, "dgx-h100")
	f := newFakeAttacher()
	marks := attachmark.Dir(h.dataDir)
	d := h.networkDriverWith(f, marks)
	marked := func(pod, claim string) bool {
		t.Helper()
		ok, err := attachmark.Marked(marks, pod, claim)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
		opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), podA, podB)
	uid := string(a.UID)
	if res := prepareOne(t, d, a); res.Err != nil {
		t.Fatal(res.Err)
	}
	// The claim's spec holds containers back until the mark is there.
	spec, err := os.ReadFile(filepath.Join(h.cdiDir, specFileOf(t, h.cdiDir, uid)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"hookName": "createRuntime"`, `"attached"`, marks, uid} {
		if !strings.Contains(string(spec), want) {
			t.Errorf("CDI spec lacks %s:\n%s", want, spec)
		}
	}

	// A crash in the middle of the attach: no mark, so the container started meanwhile
	// fails and is created again.
	f.failAfterJournal = true
	// The same node through an attacher that crashes.
	d = h.startNetworkDriver(testDriver, newTestSpecs(h, marks), h.networkOptions(crashingAttacher{f}, marks))
	if err := d.net.AttachPod(h.ctx, podA, "ns/pod-a", "/var/run/netns/cni-a"); err == nil {
		t.Fatal("attach succeeded, want the simulated crash")
	}
	if marked(podA, uid) {
		t.Fatal("marked after an interrupted attach")
	}
	d2 := h.networkDriverWith(f, marks)
	for _, pod := range []string{podA, podB} {
		if err := d2.net.AttachPod(h.ctx, pod, "ns/"+pod, "/var/run/netns/cni-"+pod); err != nil {
			t.Fatal(err)
		}
		if !marked(pod, uid) {
			t.Errorf("%s not marked after its attach", pod)
		}
	}
	// A repeated event (a reconnect's synchronization) keeps it.
	if err := d2.net.AttachPod(h.ctx, podA, "ns/pod-a", "/var/run/netns/cni-a"); err != nil || !marked(podA, uid) {
		t.Errorf("repeated attach: err %v, marked %v", err, marked(podA, uid))
	}

	if err := d2.net.DetachPod(h.ctx, podA); err != nil {
		t.Fatal(err)
	}
	if marked(podA, uid) || !marked(podB, uid) {
		t.Errorf("after pod A's detach: A marked %v (want false), B marked %v (want true)", marked(podA, uid), marked(podB, uid))
	}
	unprepareOne(t, d2, a)
	if marked(podB, uid) {
		t.Error("pod B still marked after unprepare")
	}
}
