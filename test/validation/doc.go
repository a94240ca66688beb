// Package validation checks the driver's ResourceSlices with the Kubernetes API server's
// own code: the registry strategy that drops fields of disabled features, the
// handwritten validation and the declarative validation, at the Kubernetes version the
// driver is built against. It has tests only.
package validation
