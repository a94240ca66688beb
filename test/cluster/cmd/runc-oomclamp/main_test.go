package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestFilesToClamp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"create", []string{"--root", "/r", "--log", "/l", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/p", "id"}, []string{"/b/config.json"}},
		{"create with =", []string{"create", "--bundle=/b", "id"}, []string{"/b/config.json"}},
		{"run short flag", []string{"run", "-b", "/b", "id"}, []string{"/b/config.json"}},
		{"exec", []string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, []string{"/tmp/p.json"}},
		{"start", []string{"--root", "/r", "start", "id"}, nil},
		{"delete", []string{"delete", "--force", "id"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := filesToClamp(tc.args); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("filesToClamp(%v) = %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}

func TestClamp(t *testing.T) {
	tests := []struct {
		name, in string
		want     any
	}{
		{"bundle negative", `{"ociVersion":"1.0.2","process":{"oomScoreAdj":-998,"args":["/pause"]}}`, float64(0)},
		{"bundle positive", `{"process":{"oomScoreAdj":1000}}`, float64(1000)},
		{"bundle absent", `{"process":{"args":["x"]}}`, nil},
		{"process file negative", `{"oomScoreAdj":-997,"args":["sh"]}`, float64(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(p, []byte(tc.in), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := clamp(p); err != nil {
				t.Fatalf("clamp: %v", err)
			}
			data, _ := os.ReadFile(p)
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			target := doc
			if proc, ok := doc["process"].(map[string]any); ok {
				target = proc
			}
			if got := target["oomScoreAdj"]; got != tc.want {
				t.Fatalf("oomScoreAdj = %v, want %v (file %s)", got, tc.want, data)
			}
		})
	}
}
