package plugin

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenShared listens on a TCP address with SO_REUSEPORT. The plugin runs on the host
// network, and during a rolling update of the DaemonSet the new instance starts next to
// the old one (maxSurge 1): both must be able to serve the liveness and metrics ports, or
// the new instance would fail to start until the old one is gone, which it never is
// before the new one is Ready.
func listenShared(ctx context.Context, address string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	lis, err := lc.Listen(ctx, "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", address, err)
	}
	return lis, nil
}
