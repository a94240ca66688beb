// Command valuesschema writes the RdmaPool part of the chart's values.schema.json from
// the RdmaPool CRD, so that a pool value is checked by the same schema as the RdmaPool it
// becomes: a misspelt selector or a link type in the wrong case fails helm template and
// helm install instead of being pruned by the API server or refused after the release.
// `make manifests` runs it; `make manifests-check` fails when its output differs from the
// file.
//
//	valuesschema [-crd FILE] [-schema FILE] [-o FILE]
//
// The rest of values.schema.json is written by hand and kept as it is, key order included.
// The values that take RdmaPool fields are listed in poolValues (pools.go).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "deployments/helm/rdma-dra-driver"

func main() {
	crdFile := flag.String("crd", chartDir+"/crds/rdma.dra.io_rdmapools.yaml", "the RdmaPool CRD")
	version := flag.String("version", "v1alpha1", "the CRD version whose schema the chart's pools are written in")
	schemaFile := flag.String("schema", chartDir+"/values.schema.json", "the chart's values schema to read")
	out := flag.String("o", "", "where to write the result; default: -schema, in place")
	flag.Parse()
	if *out == "" {
		*out = *schemaFile
	}
	if err := run(*crdFile, *version, *schemaFile, *out); err != nil {
		fmt.Fprintln(os.Stderr, "valuesschema:", err)
		os.Exit(1)
	}
}

func run(crdFile, version, schemaFile, out string) error {
	spec, err := crdSpecSchema(crdFile, version)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		return fmt.Errorf("read the values schema: %w", err)
	}
	result, err := rewrite(data, spec, filepath.Join("crds", filepath.Base(crdFile)))
	if err != nil {
		return fmt.Errorf("%s: %w", schemaFile, err)
	}
	if out == schemaFile && bytes.Equal(result, data) {
		return nil
	}
	return os.WriteFile(out, result, 0o644)
}

// rewrite returns the values schema data with the RdmaPool part written from spec.
func rewrite(data []byte, spec *apiextensionsv1.JSONSchemaProps, source string) ([]byte, error) {
	parsed, err := decodeOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	doc, ok := parsed.(*object)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	converted, err := fromCRD(spec, "spec")
	if err != nil {
		return nil, err
	}
	if err := generate(doc, converted, source); err != nil {
		return nil, err
	}
	return encodeOrdered(doc)
}

// crdSpecSchema returns the schema of spec in version of the CRD in file.
func crdSpecSchema(file, version string) (*apiextensionsv1.JSONSchemaProps, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the CRD: %w", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("decode %s: %w", file, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("%s: version %s has no schema", file, version)
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return nil, fmt.Errorf("%s: version %s has no spec in its schema", file, version)
		}
		return &spec, nil
	}
	return nil, fmt.Errorf("%s: no version %s", file, version)
}
