package cdi

// HookBinary is the file name of the memlock OCI hook, next to the plugin in the image
// and in the install directory on the host.
const HookBinary = "rdma-dra-cdi-hook"

// HookFileName is the installed hook's file name for the driver driverName. The default
// driver's is HookBinary, as in earlier versions, so that the CDI specs of claims prepared
// before an upgrade keep naming an existing file; any other driver's carries its name, so
// that two installations sharing a hook directory never replace or remove each other's.
func HookFileName(driverName string) string {
	if driverName == "" || driverName == DefaultDriverName {
		return HookBinary
	}
	return HookBinary + "-" + driverName
}
