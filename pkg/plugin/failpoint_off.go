//go:build !failpoint

// The stubs of the test-only prepare failpoint (failpoint.go) for binaries built without
// -tags failpoint, release builds among them: every hold is off and the environment is
// not read, and calls of these empty functions compile to nothing.

package plugin

import "context"

// PrepareHoldFile returns "": without the failpoint tag there is no hold file to read.
func PrepareHoldFile() string { return "" }

// Failpoint is the test-only prepare hold; without the failpoint tag it is always off.
type Failpoint struct{}

// NewFailpoint returns nil, a hold that is off, whatever path is.
func NewFailpoint(string) *Failpoint { return nil }

// Path returns "": there is no hold file.
func (*Failpoint) Path() string { return "" }

// Wait returns nil at once: nothing holds prepare.
func (*Failpoint) Wait(context.Context) error { return nil }
