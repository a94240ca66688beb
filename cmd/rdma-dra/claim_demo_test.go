package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClaimDemo keeps demo/gpu-nic-8x8 in step with the command: the manifest's header
// names the command, its README shows the same command, and the manifest's
// ResourceClaimTemplate is exactly what that command prints.
func TestClaimDemo(t *testing.T) {
	const dir = "../../demo/gpu-nic-8x8/"
	manifest, err := os.ReadFile(dir + "gpu-nic-8x8.yaml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(dir + "README.md")
	if err != nil {
		t.Fatal(err)
	}
	var command string
	for line := range strings.Lines(string(manifest)) {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#   rdma-dra claim "); ok {
			command = "rdma-dra claim " + c
			break
		}
	}
	if command == "" {
		t.Fatal(`gpu-nic-8x8.yaml: no header line "#   rdma-dra claim ..."`)
	}
	if !strings.Contains(string(readme), "$ "+command+"\n") {
		t.Errorf("README.md does not show the manifest's command %q", "$ "+command)
	}
	var template string
	for doc := range strings.SplitSeq(string(manifest), "---\n") {
		if strings.Contains(doc, "\nkind: ResourceClaimTemplate\n") || strings.HasPrefix(doc, "kind: ResourceClaimTemplate\n") {
			template = doc
		}
	}
	stdout, stderr, code := runApp(t, "", strings.Fields(command)[1:]...)
	if code != 0 || stderr != "" {
		t.Fatalf("%s: exit status %d, stderr %q", command, code, stderr)
	}
	if diff := cmp.Diff(stdout, template); diff != "" {
		t.Errorf("the manifest's ResourceClaimTemplate is not what %s prints (-command +manifest):\n%s", command, diff)
	}
}
