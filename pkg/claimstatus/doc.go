// Package claimstatus writes the status.devices entries of a DRA driver into its
// prepared ResourceClaims, in the background and within a budget of its own.
//
// Callers hand a Writer the desired status of a claim's devices (Set, or Update to change
// it in place) and return at once; the Writer keeps the latest desired status per claim
// UID and writes it with a merge patch guarded by the claim's UID and resourceVersion, so
// that it never overwrites another driver's entries or a claim that was deleted and
// created again. Failed writes are retried with per-claim backoff while the claim is
// known; Forget drops a claim that was unprepared. Every write, retry, coalesced or
// forgotten change and the lag from a change to its write are counted in pkg/metrics.
//
// What a device's entry says (the data in status.devices[].data) is the API type
// v1alpha1.DeviceStatusData; which devices a claim has and what their data is, is the
// driver's to decide (pkg/plugin builds it at prepare and when a pod's network is
// attached). The package knows nothing of the driver beyond its name.
package claimstatus
