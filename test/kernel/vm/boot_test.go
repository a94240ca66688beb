package vm

import (
	"strings"
	"testing"
)

func TestParseResults(t *testing.T) {
	// As the VM's results port carries it: CRLF line ends, a test whose subtests report
	// after it, a skipped test, and /init's exit line.
	out := strings.Join([]string{
		"=== RUN   TestA",
		"=== RUN   TestA/one",
		"    a_test.go:9: boom",
		"--- FAIL: TestA (1.00s)",
		"    --- FAIL: TestA/one (1.00s)",
		"=== RUN   TestB",
		"--- PASS: TestB (0.00s)",
		"=== RUN   TestC",
		"    c_test.go:3: no rxe",
		"--- SKIP: TestC (0.00s)",
		"FAIL",
		"vm: tests exited 1",
	}, "\r\n") + "\r\n"
	results, exit, err := ParseResults([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if exit != 1 {
		t.Errorf("exit %d, want 1", exit)
	}
	var got []string
	for _, r := range results {
		got = append(got, r.Name+" "+r.Outcome)
	}
	if strings.Join(got, ",") != "TestA FAIL,TestB PASS,TestC SKIP" {
		t.Errorf("results %v", got)
	}
	if a := results[0].Output; !strings.Contains(a, "boom") || !strings.Contains(a, "--- FAIL: TestA/one") || strings.Contains(a, "\r") {
		t.Errorf("TestA's output lacks its log or subtest result, or keeps CRs:\n%q", a)
	}
}

func TestParseResultsIncomplete(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"crash mid-test", "=== RUN   TestA\npanic: x\n", "TestA started and never finished"},
		{"no exit line", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\n", "no exit status"},
		{"failed without a failed test", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nvm: tests exited 2\n", "exited 2 without a failed test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseResults([]byte(tc.out))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
