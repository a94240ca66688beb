package main

import "testing"

// TestEveryFlagHasAnEnvTwin keeps the project's rule for this binary.
func TestEveryFlagHasAnEnvTwin(t *testing.T) {
	for _, f := range newApp().Flags {
		if ev, ok := f.(interface{ GetEnvVars() []string }); !ok || len(ev.GetEnvVars()) == 0 {
			t.Errorf("flag %v has no environment variable", f.Names())
		}
	}
}
