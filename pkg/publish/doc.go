// Package publish keeps a node's ResourceSlices in line with its hardware.
//
// A [Publisher] scans the node (a [Discoverer]), builds the device model of the inventory
// (pkg/devicemodel) and hands the slices to a [ResourcePublisher], the ResourceSlice
// controller behind the kubelet plugin helper. [Publisher.Run] does it again whenever a
// [Trigger] fires, damped by a health.Limiter.
//
// Invariants:
//   - A scan that finds the same inventory (and the same flapping ports) publishes nothing:
//     a quiet node causes no API traffic.
//   - The last state wins: a republish held back by the limiter scans the node as it is
//     when it is served, and signals that arrive meanwhile merge into it.
//   - Both models of the inventory are kept, the published one and the other, so that
//     [Publisher.Lookup] finds a device allocated just before a switch to the legacy
//     model; on a node with [ModelAuto], [Publisher.HandleDroppedFields] makes that switch
//     once, when the API server drops the partitionable model's fields, and it is never
//     damped.
//   - The [ScanObserver] and the sink are called with the publisher's lock held; neither
//     may call back into the publisher.
//
// It does not talk to the API server itself (the ResourceSlice controller of
// k8s.io/dynamic-resource-allocation does), decide when to look at the node (pkg/health
// does, through the Trigger), name or describe devices (pkg/devicemodel), or prepare
// claims (pkg/plugin, which finds devices through Lookup).
package publish
