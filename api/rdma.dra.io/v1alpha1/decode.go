package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// DecodeConfig decodes one RdmaConfig from JSON (what the API server stores in opaque
// parameters) or YAML, strictly: the apiVersion must be rdma.dra.io/v1alpha1, the kind
// RdmaConfig, and an unknown or duplicated field is an error that names the field. Keys
// match case-sensitively, as in the Kubernetes API.
//
// DecodeConfig checks the shape of the document only; call Validate for the values.
func DecodeConfig(raw []byte) (*RdmaConfig, error) {
	data := bytes.TrimSpace(raw)
	if len(data) == 0 {
		return nil, errors.New("decode RdmaConfig: empty document")
	}
	if data[0] != '{' {
		// Not JSON: YAML, which is a superset. The strict conversion rejects duplicate
		// keys that the JSON decoder would no longer see.
		converted, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			return nil, fmt.Errorf("decode RdmaConfig: %w", err)
		}
		data = converted
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, errors.New("decode RdmaConfig: not an object")
	}

	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &tm); err != nil {
		return nil, fmt.Errorf("decode RdmaConfig: %w", err)
	}
	if err := checkTypeMeta(tm.APIVersion, tm.Kind); err != nil {
		return nil, fmt.Errorf("decode RdmaConfig: %w", err)
	}

	cfg := &RdmaConfig{}
	strictErrs, err := kjson.UnmarshalStrict(data, cfg)
	if err != nil {
		return nil, fmt.Errorf("decode RdmaConfig: %w", err)
	}
	if len(strictErrs) > 0 {
		return nil, fmt.Errorf("decode RdmaConfig: %w", errors.Join(strictErrs...))
	}
	return cfg, nil
}

// checkTypeMeta says what is wrong with an apiVersion and kind, naming both the value
// found and the one wanted.
func checkTypeMeta(apiVersion, kind string) error {
	want := SchemeGroupVersion.String()
	switch {
	case apiVersion == "":
		return fmt.Errorf("apiVersion is missing, want %q", want)
	case apiVersion != want:
		return fmt.Errorf("apiVersion %q is not supported, want %q", apiVersion, want)
	case kind == "":
		return fmt.Errorf("kind is missing, want %q", RdmaConfigKind)
	case kind != RdmaConfigKind:
		return fmt.Errorf("kind %q is not supported, want %q", kind, RdmaConfigKind)
	}
	return nil
}

// unmarshalNumberOrString returns a JSON string's value, or the compact text of any
// other JSON value. Only strings and numbers are valid, but anything else is kept rather
// than refused here, so that Validate reports it with its field path (the JSON decoder
// would drop the path of an error returned from UnmarshalJSON).
func unmarshalNumberOrString(data []byte) (string, error) {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// marshalNumberOrString writes canonical decimal integers as JSON numbers, so that
// `gidIndex: 3` reads back as written, and everything else as a JSON string.
func marshalNumberOrString(s string) ([]byte, error) {
	if _, ok := canonicalUint(s, 64); ok {
		return []byte(s), nil
	}
	return json.Marshal(s)
}

// parseMemlockBytes parses a positive whole number of bytes written as an integer or a
// quantity; fractions ("0.5", "1m") and values beyond int64 are refused.
func parseMemlockBytes(s string) (int64, bool) {
	// ParseQuantity's time and memory grow faster than the length of its input: nothing
	// longer than any valid value reaches it.
	if len(s) > MaxScalarLength || s == string(MemlockUnset) || s == string(MemlockUnlimited) {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n > 0
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 || q.CmpInt64(math.MaxInt64) >= 0 {
		return 0, false
	}
	// ParseQuantity clamps what exceeds int64 to its maximum, hence >= above. Value
	// rounds fractions up, and a limit in bytes must be exact.
	n := q.Value()
	if q.Cmp(*resource.NewQuantity(n, resource.BinarySI)) != 0 {
		return 0, false
	}
	return n, true
}
