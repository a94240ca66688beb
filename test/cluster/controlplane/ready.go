package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Check is one readiness check: nil means ready.
type Check func(ctx context.Context) error

const (
	// pollInterval is the time between two checks of WaitFor.
	pollInterval = 200 * time.Millisecond
	// checkTimeout bounds one check, whatever its client's own timeout.
	checkTimeout = 5 * time.Second
)

// WaitFor runs check until it passes, every pollInterval. It gives up when alive (if not
// nil) says the process being waited for has ended, when timeout passes or when ctx ends;
// the error names what and carries the last check's error.
func WaitFor(ctx context.Context, what string, timeout time.Duration, alive func() bool, check Check) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, checkTimeout)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		if alive != nil && !alive() {
			return fmt.Errorf("%s exited: %w", what, err)
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("wait for %s: %w (last: %w)", what, parent.Err(), err)
			}
			return fmt.Errorf("%s not ready after %s: %w", what, timeout, err)
		case <-time.After(pollInterval):
		}
	}
}

// HTTPCheck is ready when url answers c's GET with 200 and, if want is not empty, with a
// body whose first 4 KiB contain want.
func HTTPCheck(c *http.Client, url, want string) Check {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			return fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
		}
		return nil
	}
}

// SelfSignedClient reaches a loopback component that serves with a self-signed
// certificate (kube-scheduler and kube-controller-manager without serving certificates
// of their own): it does not verify the server's certificate.
func SelfSignedClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed health endpoints on loopback
	}}
}
