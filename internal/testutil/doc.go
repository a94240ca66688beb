// Package testutil holds, in its subpackages, helpers that only _test.go files import.
package testutil
