package host

import (
	"context"
	"os"
	"runtime"
	"testing"
)

func TestDetect(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	if _, err := os.Stat("/proc/net/route"); err != nil {
		t.Skip("no /proc/net/route")
	}
	f, err := Detect(context.Background())
	if err != nil {
		t.Skipf("host without a default IPv4 route? %v", err)
	}
	if f.NodeName == "" || f.NodeIP == nil || f.MTU <= 0 {
		t.Errorf("facts incomplete: %+v", f)
	}
	if f.CgroupDriver != "cgroupfs" && f.CgroupDriver != "systemd" {
		t.Errorf("cgroup driver = %q", f.CgroupDriver)
	}
}
