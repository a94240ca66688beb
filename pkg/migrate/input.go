package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Source is where a plugin configuration was found.
type Source int

// The sources configJSON tells apart.
const (
	// SourceFile is the plugin's config.json itself.
	SourceFile Source = iota
	// SourceConfigMap is a ConfigMap holding it under data."config.json".
	SourceConfigMap
	// SourceNicClusterPolicy is an NVIDIA Network Operator NicClusterPolicy holding it
	// as a string in spec.<section>.config.
	SourceNicClusterPolicy
)

// input is the plugin's config.json and where it was found.
type input struct {
	raw    []byte
	where  string // for messages: config file, ConfigMap data."config.json"
	source Source
}

// configJSON finds the plugin's config.json in data: the file itself, a ConfigMap that
// holds it under data."config.json", or a NicClusterPolicy (NVIDIA Network Operator) that
// holds it as a string in spec.<section>.config. other is the other plugin's section,
// named in the hint when only that one is there.
//
// The plugins read config.json with encoding/json, so whatever is JSON is read as JSON
// and a syntax error is reported with its line and column: YAML would accept a trailing
// comma, which the plugin refused. The outer document may be YAML (a ConfigMap or a
// NicClusterPolicy as kubectl prints them) when name ends in .yaml or .yml, or when it
// does not start with { or [; the config string inside is always JSON.
func configJSON(data []byte, name, section, other, otherFlag string) (*input, error) {
	var jsonData []byte
	if isJSON(data, name) {
		if err := checkJSON(data); err != nil {
			return nil, fmt.Errorf("parse input as JSON: %w", err)
		}
		jsonData = data
	} else {
		var err error
		if jsonData, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("parse input: %w", err)
		}
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(jsonData, &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("parse input: want a JSON or YAML object (the plugin's config.json, a ConfigMap or a NicClusterPolicy), got %s", jsonKind(jsonData))
	}
	var kind string
	if raw, ok := doc["kind"]; ok {
		if err := json.Unmarshal(raw, &kind); err != nil {
			return nil, errors.New("parse input: kind is not a string")
		}
	}
	var in input
	switch kind {
	case "ConfigMap":
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal(jsonData, &cm); err != nil {
			return nil, errors.New(`parse input: ConfigMap data must map names to strings`)
		}
		cfg, ok := cm.Data["config.json"]
		if !ok {
			return nil, errors.New(`ConfigMap has no data."config.json"`)
		}
		in = input{raw: []byte(cfg), where: `ConfigMap data."config.json"`, source: SourceConfigMap}
	case "NicClusterPolicy":
		var ncp struct {
			Spec map[string]json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(jsonData, &ncp); err != nil {
			return nil, errors.New("parse input: NicClusterPolicy spec is not an object")
		}
		cfg, ok := sectionConfig(ncp.Spec[section])
		if !ok {
			if _, has := sectionConfig(ncp.Spec[other]); has {
				return nil, fmt.Errorf("NicClusterPolicy has no spec.%s.config but has spec.%s.config: use %s", section, other, otherFlag)
			}
			return nil, fmt.Errorf("NicClusterPolicy has no spec.%s.config", section)
		}
		in = input{raw: []byte(cfg), where: "NicClusterPolicy spec." + section + ".config", source: SourceNicClusterPolicy}
	case "":
		return &input{raw: jsonData, where: "config file", source: SourceFile}, nil
	default:
		return nil, fmt.Errorf("input is a %s; want the plugin's config.json, a ConfigMap holding it or a NicClusterPolicy", kind)
	}
	if err := checkJSON(in.raw); err != nil {
		return nil, fmt.Errorf("parse %s as JSON: %w", in.where, err)
	}
	return &in, nil
}

// isJSON says whether the input is read as JSON: by its name, else by its first character.
func isJSON(data []byte, name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml":
		return false
	}
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// checkJSON accepts exactly one JSON value and reports anything else with the line and
// column where it goes wrong.
func checkJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			// Offset counts the bytes read up to and including the offending one.
			return fmt.Errorf("%s: %s", position(data, se.Offset-1), se.Error())
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("%s: unexpected end of JSON input", position(data, int64(len(data))))
		}
		return err
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("%s: more after the JSON value", position(data, int64(len(data)-len(rest))))
	}
	return nil
}

// position names the line and column (both from 1) of byte offset in data.
func position(data []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d (byte %d)", line, col, offset)
}

func sectionConfig(raw json.RawMessage) (string, bool) {
	var s struct {
		Config *string `json:"config"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s.Config == nil {
		return "", false
	}
	return *s.Config, true
}

// jsonKind names the JSON type of data for messages: never a Go type.
func jsonKind(data []byte) string {
	t := strings.TrimSpace(string(data))
	switch {
	case t == "" || t == "null":
		return "nothing"
	case strings.HasPrefix(t, "["):
		return "a list"
	case strings.HasPrefix(t, `"`):
		return "a string"
	case t == "true" || t == "false":
		return "a boolean"
	}
	return "a number"
}

// objectKeys returns the keys of a JSON object; ok is false if raw is not an object.
func objectKeys(raw []byte) (keys []string, ok bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, true
}

// unknownKeys returns the keys of the object raw that are not in known, sorted.
func unknownKeys(raw []byte, known ...string) []string {
	keys, _ := objectKeys(raw)
	var out []string
	for _, k := range keys {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	return out
}

// decode decodes JSON into v with a message that names the place and the JSON type,
// not a Go type.
func decode(raw []byte, v any, where string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "the document"
			}
			return fmt.Errorf("decode %s: %s is %s, which is the wrong type", where, field, te.Value)
		}
		return fmt.Errorf("decode %s: %w", where, err)
	}
	return nil
}
