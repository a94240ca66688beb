package checkpoint

import (
	"fmt"
	"slices"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

// NetworkVersion is the version of the network record ([Network]) this build reads and
// writes. Records of releases before the field existed carry none and have the shape of
// version 1; Decode gives them the version. A record of a higher version makes Decode
// fail with [ErrFutureVersion], like a newer file.
//
// The record is JSON inside the checkpoint; releases that keep it as raw JSON decode it
// without the version field and ignore it, so a checkpoint written by this build reads
// there as before. Adding an optional field keeps the version; a change that an older
// build would get wrong if it read the record bumps it.
const NetworkVersion = 1

// Network is what a claim's entry records about network attachment. Prepare writes the
// pods and the devices to attach; the pod network (pkg/podnet) adds one attachment per
// device and pod, journaled before every step that changes the node.
type Network struct {
	// Version is the record's format version, see [NetworkVersion].
	Version int `json:"version,omitempty"`
	// Pods are the UIDs of the pods the claim is reserved for (status.reservedFor),
	// merged over every prepare of the claim: a shared claim gains pods over time, and the
	// periodic cleanup drops those no longer reserved once nothing of theirs is attached.
	Pods []string `json:"pods,omitempty"`
	// Generation is the claim's generation at prepare, for the status conditions.
	Generation int64 `json:"generation,omitempty"`
	// Devices are the claim's devices that get something attached, in allocation order.
	Devices []NetworkDevice `json:"devices,omitempty"`
}

// NetworkDevice is one allocated device of a claim whose network goes into its pods.
type NetworkDevice struct {
	// Request, Device and ShareID identify the device in the claim's entry and status.
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	ShareID string `json:"shareID,omitempty"`
	// IBDev and Port are the RDMA port; LinkLayer and Netdev its link layer and host
	// netdev when the claim was prepared.
	IBDev     string `json:"ibdev"`
	Port      int    `json:"port"`
	LinkLayer string `json:"linkLayer"`
	Netdev    string `json:"netdev,omitempty"`
	// UVerbs is the container path of the port's uverbs device, which tells which
	// containers of a pod use the device.
	UVerbs string `json:"uverbs,omitempty"`
	// Config is the device's merged, defaulted network configuration.
	Config v1alpha1.NetworkConfig `json:"config"`
	// GIDPolicy is the device's gidIndex policy: only auto lets the pod's own GID index
	// into the environment.
	GIDPolicy v1alpha1.GIDIndexPolicy `json:"gidPolicy"`
	// MoveRDMA is set on a node in exclusive RDMA netns mode: the RDMA device itself
	// moves into the pod, or the pod sees no RDMA device at all.
	MoveRDMA bool `json:"moveRDMA,omitempty"`
	// Policy is what the class's allowedNetwork grants that the attach side needs again
	// at attach time; nil in records of plugins that predate the policy, whose address
	// pools are chosen as they were then.
	Policy *NetworkPolicy `json:"policy,omitempty"`
	// Stale marks a device the claim no longer has (it was allocated again) whose
	// attachments are kept only to be detached.
	Stale bool `json:"stale,omitempty"`
	// Attachments holds one attachment per pod, in the order they were made.
	Attachments []PodAttachment `json:"attachments,omitempty"`
}

// NetworkPolicy is the part of a class's allowedNetwork the attach side applies.
type NetworkPolicy struct {
	// AddressPools are the node address pools ipam: node may take addresses from.
	AddressPools []string `json:"addressPools,omitempty"`
}

// PodAttachment is the journal of one device's attachment into one pod.
type PodAttachment struct {
	Pod   string          `json:"pod"`
	State netattach.State `json:"state"`
}

// SetNetwork stores n as the entry's network record, with the current version; nil or
// a record without devices removes it. The entry keeps n itself, not a copy.
func (c *Claim) SetNetwork(n *Network) {
	if n == nil || len(n.Devices) == 0 {
		c.Network = nil
		return
	}
	n.Version = NetworkVersion
	c.Network = n
}

// HasPod reports whether the claim is reserved for pod.
func (n *Network) HasPod(pod string) bool { return slices.Contains(n.Pods, pod) }

// MergePods adds pods to n.Pods, keeps them sorted and reports whether any was new.
func (n *Network) MergePods(pods []string) bool {
	changed := false
	for _, p := range pods {
		if !slices.Contains(n.Pods, p) {
			n.Pods = append(n.Pods, p)
			changed = true
		}
	}
	slices.Sort(n.Pods)
	return changed
}

// AttachedTo reports whether any device of the claim has an attachment into pod, in
// any phase.
func (n *Network) AttachedTo(pod string) bool {
	for i := range n.Devices {
		if n.Devices[i].Attachment(pod) != nil {
			return true
		}
	}
	return false
}

// Attachment returns the device's attachment into pod, or nil.
func (nd *NetworkDevice) Attachment(pod string) *PodAttachment {
	for i := range nd.Attachments {
		if nd.Attachments[i].Pod == pod {
			return &nd.Attachments[i]
		}
	}
	return nil
}

// DropAttachment removes the device's attachment into pod.
func (nd *NetworkDevice) DropAttachment(pod string) {
	nd.Attachments = slices.DeleteFunc(nd.Attachments, func(a PodAttachment) bool { return a.Pod == pod })
}

// checkNetwork converts the network record of the entry uid from the shape of an
// earlier release and refuses one of a newer.
func checkNetwork(uid string, n *Network) error {
	if n == nil {
		return nil
	}
	switch {
	case n.Version > NetworkVersion:
		return fmt.Errorf("%w: network record of entry %q has version %d, this plugin reads up to %d", ErrFutureVersion, uid, n.Version, NetworkVersion)
	case n.Version < 0:
		return fmt.Errorf("%w: network record of entry %q has version %d", ErrCorrupt, uid, n.Version)
	case n.Version == 0:
		// Written before records had a version: the shape of version 1.
		n.Version = 1
	}
	return nil
}

// DeepCopy returns a copy of n that shares nothing with it; nil for nil.
func (n *Network) DeepCopy() *Network {
	if n == nil {
		return nil
	}
	out := *n
	out.Pods = slices.Clone(n.Pods)
	if n.Devices != nil {
		out.Devices = make([]NetworkDevice, len(n.Devices))
		for i := range n.Devices {
			out.Devices[i] = n.Devices[i].deepCopy()
		}
	}
	return &out
}

func (nd *NetworkDevice) deepCopy() NetworkDevice {
	out := *nd
	out.Config = *nd.Config.DeepCopy()
	if nd.Policy != nil {
		out.Policy = &NetworkPolicy{AddressPools: slices.Clone(nd.Policy.AddressPools)}
	}
	if nd.Attachments != nil {
		out.Attachments = make([]PodAttachment, len(nd.Attachments))
		for i, a := range nd.Attachments {
			out.Attachments[i] = PodAttachment{Pod: a.Pod, State: cloneState(a.State)}
		}
	}
	return out
}

// cloneState returns a copy of st that shares no slice or pointer with it.
func cloneState(st netattach.State) netattach.State {
	out := st
	out.Spec.Addresses = slices.Clone(st.Spec.Addresses)
	out.Spec.Routes = slices.Clone(st.Spec.Routes)
	out.PodAddresses = slices.Clone(st.PodAddresses)
	if st.GIDIndex != nil {
		v := *st.GIDIndex
		out.GIDIndex = &v
	}
	if st.Host != nil {
		h := *st.Host
		h.Addresses = slices.Clone(st.Host.Addresses)
		h.Routes = slices.Clone(st.Host.Routes)
		out.Host = &h
	}
	return out
}
