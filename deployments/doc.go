// Package deployments holds no code: its tests check the Helm chart's static renders
// (deployments/static) and the demo workloads (demo/) against the API types, the DRA CEL
// library and the driver's own device model, so that a manifest cannot drift from the
// code it configures.
package deployments
