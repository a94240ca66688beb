package nodeconfig

import (
	"reflect"
	"testing"
	"time"
)

func TestParseFlapping(t *testing.T) {
	type effective struct {
		disabled                 bool
		window, quiet            time.Duration
		linkDowned, symbolErrors int
	}
	defaults := effective{window: 10 * time.Minute, quiet: 10 * time.Minute, linkDowned: 2, symbolErrors: 100}
	tests := []struct {
		name    string
		data    string
		want    effective
		wantErr []string
	}{
		{name: "absent: the defaults", data: "shares: 4", want: defaults},
		{name: "zeros: the defaults", data: "health: {flapping: {windowSeconds: 0, linkDowned: 0, symbolErrors: 0, quietSeconds: 0}}", want: defaults},
		{name: "every field", data: "health: {flapping: {windowSeconds: 30, linkDowned: 1, symbolErrors: 5000, quietSeconds: 10}}",
			want: effective{window: 30 * time.Second, quiet: 10 * time.Second, linkDowned: 1, symbolErrors: 5000}},
		{name: "at the bounds", data: "health: {flapping: {windowSeconds: 86400, linkDowned: 255, symbolErrors: 65535, quietSeconds: 1}}",
			want: effective{window: 24 * time.Hour, quiet: time.Second, linkDowned: 255, symbolErrors: 65535}},
		{name: "disabled", data: "health: {flapping: {disabled: true}}", want: effective{disabled: true, window: 10 * time.Minute, quiet: 10 * time.Minute, linkDowned: 2, symbolErrors: 100}},
		{name: "link downs beyond what the counter holds", data: "health: {flapping: {linkDowned: 256}}",
			wantErr: []string{"health.flapping.linkDowned: Invalid value: 256: must be between 1 and 255, or 0 for the default 2"}},
		{name: "symbol errors beyond what the counter holds", data: "health: {flapping: {symbolErrors: 65536}}",
			wantErr: []string{"health.flapping.symbolErrors: Invalid value: 65536"}},
		{name: "negative windows, both named", data: "health: {flapping: {windowSeconds: -1, quietSeconds: -5}}",
			wantErr: []string{"health.flapping.windowSeconds: Invalid value: -1", "health.flapping.quietSeconds: Invalid value: -5"}},
		{name: "window longer than a day", data: "health: {flapping: {windowSeconds: 86401}}",
			wantErr: []string{"health.flapping.windowSeconds: Invalid value: 86401: must be between 1 and 86400, or 0 for the default 600"}},
		{name: "a duration string is not seconds", data: "health: {flapping: {windowSeconds: 5m}}",
			wantErr: []string{"health.flapping.windowSeconds"}},
		{name: "unknown field", data: "health: {flapping: {window: 30}}",
			wantErr: []string{`unknown field "health.flapping.window"`}},
		{name: "unknown section", data: "health: {flaps: {}}",
			wantErr: []string{`unknown field "health.flaps"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := parseCase(t, tt.data, tt.wantErr)
			if !ok {
				return
			}
			f := &c.Health.Flapping
			got := effective{disabled: f.Disabled, window: f.Window(), quiet: f.Quiet()}
			got.linkDowned, got.symbolErrors = f.Thresholds()
			if got != tt.want {
				t.Errorf("effective %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestFlappingDefaultsStayZero: defaulting leaves the section as written, so that a file
// without it equals Default().
func TestFlappingDefaultsStayZero(t *testing.T) {
	c, err := Parse([]byte("version: v1alpha1"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) || c.Health != (HealthConfig{}) {
		t.Errorf("a file without health parses as %+v, want Default()", c.Health)
	}
}
