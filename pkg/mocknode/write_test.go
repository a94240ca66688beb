package mocknode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteProfile(t *testing.T) {
	dir := t.TempDir()
	if err := WriteProfile("soft-roce", dir, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, SysDir, "class", "infiniband")); err != nil {
		t.Errorf("no sysfs tree written: %v", err)
	}
	if err := WriteProfile("no-such-profile", t.TempDir(), WriteOptions{}); err == nil || !strings.Contains(err.Error(), "no-such-profile") {
		t.Errorf("unknown profile: error %v, want one naming it", err)
	}
	if err := WriteProfile("soft-roce", dir, WriteOptions{}); err == nil || !strings.Contains(err.Error(), "soft-roce") {
		t.Errorf("non-empty target without Overwrite: error %v, want one naming the profile", err)
	}
}
