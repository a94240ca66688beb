package v1alpha1

// DeviceStatusData is what the kubelet plugin reports of a device it prepared, in the
// ResourceClaim's status.devices[].data (the entry of driver rdma.dra.io for that pool,
// device and share): which HCA port the pod got and where the container finds its
// uverbs device. It is written once the claim is prepared, beside a Ready condition;
// what the pod got of the port's network is in the same entry's networkData.
//
// Decode it from the entry's raw data:
//
//	var data v1alpha1.DeviceStatusData
//	err := json.Unmarshal(claim.Status.Devices[i].Data.Raw, &data)
//
// The port facts use the names and JSON keys of the device's attributes and of the node's
// inventory (rdma-dra discover -o json), so that one fact reads alike everywhere. Fields
// are added, never renamed or removed, within v1alpha1.
type DeviceStatusData struct {
	// IBDev is the name of the RDMA device on the node, as ibv_devinfo and
	// /sys/class/infiniband name it, e.g. mlx5_0 or mlx5_bond_0 (a hardware LAG).
	IBDev string `json:"ibdev"`
	// Port is the port of that device, counted from 1 as in ibv_devinfo.
	Port int `json:"port"`
	// LinkLayer is InfiniBand or Ethernet (RoCE); omitted when the node could not read it.
	LinkLayer string `json:"link_layer,omitempty"`
	// GIDIndex is the RoCE GID index the node chose for the port on the host (the rule
	// of docs/sysfs.md; the value NCCL_IB_GID_INDEX gets when the claim's config leaves it
	// to the driver); omitted on InfiniBand and when the port has no usable entry.
	GIDIndex *int `json:"gid_index,omitempty"`
	// Netdev is the port's network interface on the host, e.g. ibp3s0 or bond0; omitted
	// when the port has none. The interface the pod got, if any, is the entry's
	// networkData.interfaceName.
	Netdev string `json:"netdev,omitempty"`
	// UVerbs is the path of the port's uverbs device inside the container, e.g.
	// /dev/infiniband/uverbs4 (on the host the device may have another number); omitted
	// when the node has no uverbs device for the port.
	UVerbs string `json:"uverbs,omitempty"`
	// MorePorts are the further ports of a device that stands for several ports (a legacy
	// device, which gives a pod every port its pool selected on the node), each in the
	// same form; the fields above are its first port. Omitted for a device of one port.
	MorePorts []DeviceStatusData `json:"more_ports,omitempty"`
}
