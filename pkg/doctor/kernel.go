package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// kernelModule is a module the driver relies on, with the class it registers: a module
// that is built into the kernel and has no parameters has no module/<name> directory,
// but its class is there all the same.
type kernelModule struct{ name, class string }

var (
	coreModules = []kernelModule{{"ib_core", "class/infiniband"}, {"ib_uverbs", "class/infiniband_verbs"}}
	rdmaUCM     = kernelModule{"rdma_ucm", "class/misc/rdma_cm"}
)

func (e *env) loaded(m kernelModule) bool {
	return e.exists("module/"+m.name) || e.exists(m.class)
}

// modulesLoadFix is how to load modules now and at every boot.
func modulesLoadFix(names []string) string {
	return fmt.Sprintf("Load now with modprobe -a %s, and at boot by naming them in /etc/modules-load.d: printf '%%s\\n' %s >> /etc/modules-load.d/rdma-dra.conf",
		strings.Join(names, " "), strings.Join(names, " "))
}

// checkKernelModules: ib_core and ib_uverbs, without which there are no RDMA devices for
// user space at all.
func checkKernelModules(e *env) Result {
	r := Result{Check: CheckKernelModules}
	var have, missing, why []string
	for _, m := range coreModules {
		if e.loaded(m) {
			have = append(have, m.name)
		} else {
			missing = append(missing, m.name)
			why = append(why, fmt.Sprintf("%s not loaded (no module/%s or %s)", m.name, m.name, m.class))
		}
	}
	if len(missing) == 0 {
		r.Status, r.Found = OK, strings.Join(have, ", ")+" loaded"
		return r
	}
	r.Status = Fail
	r.Found = strings.Join(why, ", ") + " below " + e.h.SysfsRoot + ": containers get no usable RDMA device"
	r.Fix = modulesLoadFix(missing) + "; the adapter's RDMA driver (mlx5_ib, irdma, bnxt_re) loads ib_core itself."
	return r
}

// checkRDMACMModule: rdma_ucm provides /dev/infiniband/rdma_cm, which rdma_cm users (RoCE
// connection setup, UCX, NCCL with RoCE, MPI) need; verbs-only workloads do not.
func checkRDMACMModule(e *env) Result {
	r := Result{Check: CheckRDMACMModule}
	if e.loaded(rdmaUCM) {
		r.Status, r.Found = OK, "rdma_ucm loaded: containers get /dev/infiniband/rdma_cm"
		return r
	}
	r.Status = Warn
	r.Found = "rdma_ucm not loaded: containers get no /dev/infiniband/rdma_cm, so rdma_cm users (UCX, MPI, NCCL over RoCE) cannot connect"
	r.Fix = modulesLoadFix([]string{rdmaUCM.name}) + "."
	return r
}

// checkRDMADevices: without a device the plugin publishes an empty slice.
func checkRDMADevices(e *env) Result {
	r := Result{Check: CheckRDMADevices}
	if e.inv == nil {
		r.Status, r.Found = Fail, fmt.Sprintf("cannot read sysfs below %s: %v", e.h.SysfsRoot, e.invErr)
		r.Fix = "Pass the node's sysfs as --sysfs-root (in a container, the host's /sys mounted read-only)."
		return r
	}
	ports := e.inv.Ports
	if len(ports) == 0 {
		r.Status = Fail
		r.Found = fmt.Sprintf("no RDMA device below %s: the driver would publish nothing", filepath.Join(e.h.SysfsRoot, "class/infiniband"))
		r.Fix = "Load the adapter's RDMA driver (mlx5_ib for ConnectX, irdma for Intel E810, bnxt_re for Broadcom) and check dmesg for probe errors."
		if st, err := filepath.Glob(filepath.Join(e.h.SysfsRoot, "sys", "class", "infiniband", "*")); err == nil && len(st) > 0 {
			r.Fix = fmt.Sprintf("%s has RDMA devices: pass --sysfs-root %s.", filepath.Join(e.h.SysfsRoot, "sys"), filepath.Join(e.h.SysfsRoot, "sys"))
		}
		return r
	}
	devices, ib, eth := 0, 0, 0
	for i, p := range ports {
		if i == 0 || ports[i-1].IBDev != p.IBDev {
			devices++
		}
		switch p.LinkLayer {
		case discovery.LinkLayerInfiniBand:
			ib++
		case discovery.LinkLayerEthernet:
			eth++
		}
	}
	r.Status = OK
	r.Found = fmt.Sprintf("%s, %s (%d InfiniBand, %d Ethernet)", plural(devices, "RDMA device"), plural(len(ports), "port"), ib, eth)
	return r
}

// checkCharDevices: every device's uverbsN, which the CDI spec of each claim names, and
// rdma_cm, which it names when the host has it, must be character devices below the /dev
// root with the numbers sysfs gives them.
func checkCharDevices(e *env) Result {
	r := Result{Check: CheckCharDevices}
	if e.inv == nil {
		return e.noInventory(r.Check)
	}
	ports := e.inv.Ports
	if len(ports) == 0 {
		r.Status, r.Found = Skip, "no RDMA devices"
		return r
	}
	var problems, fixes []string
	status := OK
	devices := 0
	for i, p := range ports {
		if i > 0 && ports[i-1].IBDev == p.IBDev {
			continue
		}
		devices++
		if p.Verbs == nil {
			status = Fail
			problems = append(problems, p.IBDev+" has no uverbs device in class/infiniband_verbs")
			fixes = appendOnce(fixes, "load ib_uverbs (see "+CheckKernelModules+")")
			continue
		}
		msg, fix := e.checkNode("infiniband/"+p.Verbs.Name, sysfs.DevNumber{Major: p.Verbs.Major, Minor: p.Verbs.Minor})
		if msg != "" {
			status = Fail
			problems = append(problems, p.IBDev+": "+msg)
			fixes = appendOnce(fixes, fix)
		}
	}
	// rdma_cm is left out of the CDI spec when it is missing: a warning, not a failure.
	if dev, err := sysfs.Read(e.fs, rdmaUCM.class+"/dev", sysfs.ParseDevNumber); err != nil {
		status = Worst(status, Warn)
		problems = append(problems, "rdma_cm: no "+rdmaUCM.class)
		fixes = appendOnce(fixes, "load rdma_ucm (see "+CheckRDMACMModule+")")
	} else if msg, fix := e.checkNode("infiniband/rdma_cm", dev); msg != "" {
		status = Worst(status, Warn)
		problems = append(problems, "rdma_cm: "+msg)
		fixes = appendOnce(fixes, fix)
	}
	r.Status = status
	if status == OK {
		r.Found = fmt.Sprintf("uverbs of %s and rdma_cm: character devices below %s", plural(devices, "device"), e.devPath("infiniband"))
		return r
	}
	r.Found = strings.Join(problems, "; ")
	r.Fix = capitalize(strings.Join(fixes, "; ")) + "."
	return r
}

// checkNode checks one node below the /dev root against its sysfs number and returns
// what is wrong and how to fix it, or "" when it is right.
func (e *env) checkNode(rel string, want sysfs.DevNumber) (problem, fix string) {
	p := e.devPath(rel)
	create := fmt.Sprintf("let udev create the nodes below %s (it does when the modules load; udevadm trigger runs it again), or mknod PATH c MAJOR MINOR with the numbers above; --dev-root must be the host's /dev",
		e.devPath("infiniband"))
	n, err := e.h.StatDev(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s (%s) does not exist", p, want), create
	case err != nil:
		return err.Error(), "run as root with the host's /dev as --dev-root"
	case !n.Char:
		return fmt.Sprintf("%s is not a character device (want %s)", p, want), "remove what is there instead of a character device; " + create
	case n.Major != want.Major || n.Minor != want.Minor:
		return fmt.Sprintf("%s is %d:%d, sysfs says %s", p, n.Major, n.Minor, want), "remove nodes with the wrong number; " + create
	}
	return "", ""
}

// checkPortState: a port that is not ACTIVE stays published, tainted, and no claim gets it.
func checkPortState(e *env) Result {
	r := Result{Check: CheckPortState}
	if e.inv == nil {
		return e.noInventory(r.Check)
	}
	ports := e.inv.Ports
	if len(ports) == 0 {
		r.Status, r.Found = Skip, "no RDMA ports"
		return r
	}
	var bad, hints []string
	for _, p := range ports {
		if p.State == "ACTIVE" {
			continue
		}
		state := p.State
		if state == "" {
			state = "state unknown"
		}
		if p.PhysState != "" {
			state += " (" + p.PhysState + ")"
		}
		bad = append(bad, fmt.Sprintf("%s/%d %s", p.IBDev, p.Port, state))
		hints = appendOnce(hints, portHint(p))
	}
	if len(bad) == 0 {
		r.Status, r.Found = OK, fmt.Sprintf("%d of %d ports ACTIVE", len(ports), len(ports))
		return r
	}
	r.Status = Warn
	r.Found = fmt.Sprintf("%d of %d ports not ACTIVE: %s; the driver publishes them with the NoSchedule taint %s, so no claim gets them",
		len(bad), len(ports), strings.Join(bad, ", "), devicemodel.NotActiveTaintKey)
	r.Fix = capitalize(strings.Join(hints, "; ")) + "."
	return r
}

// portHint is what usually brings a port of this state up.
func portHint(p discovery.Port) string {
	switch {
	case p.PhysState == "Disabled":
		return "Disabled ports are turned off administratively: enable them (ibportstate <lid> <port> enable, or the switch side)"
	case p.LinkLayer == discovery.LinkLayerEthernet:
		return "a RoCE port follows its netdev: ip link set <netdev> up, and check cable and switch port"
	case p.State == "INIT" || p.State == "ARMED":
		return "INIT/ARMED with a physical link means no subnet manager has configured the port: run one on the fabric (opensm or the switch's) and check it with sminfo"
	}
	return "no physical link (Polling/Down): check cable, transceiver and the switch port"
}

// checkRDMANetns reports the RDMA network namespace mode and what it means for the driver
// (docs/network-attachment.md): both modes work, they publish different things.
func checkRDMANetns(e *env) Result {
	r := Result{Check: CheckRDMANetns}
	if e.inv == nil {
		return e.noInventory(r.Check)
	}
	src := "module/ib_core/parameters/netns_mode"
	if e.h.UseNetlink {
		src = "netlink, else " + src
	}
	switch e.inv.NetnsMode {
	case discovery.NetnsModeShared:
		r.Status = OK
		r.Found = "shared (the kernel default; from " + src + "): every pod sees every RDMA device, the driver publishes whole ports and shares, and network attachment (macvlan, ipvlan, move, ipoib) works without moving RDMA devices"
	case discovery.NetnsModeExclusive:
		r.Status = OK
		r.Found = "exclusive (from " + src + "): a pod sees only the RDMA devices moved into its namespace, so the driver publishes whole ports only and every claim needs the NRI network attachment, which moves the device into the pod (see the -nri check)"
	default:
		r.Status = Warn
		r.Found = "unknown: " + src + " cannot be read"
		r.Fix = "Load ib_core (see " + CheckKernelModules + "); `rdma system show netns` shows the mode on the host."
	}
	return r
}

// checkRoCEGID: a RoCE port needs a RoCE v2 GID with an IPv4 or global IPv6 address, the
// index the driver publishes as gid_index and passes as NCCL_IB_GID_INDEX.
func checkRoCEGID(e *env) Result {
	r := Result{Check: CheckRoCEGID}
	if e.inv == nil {
		return e.noInventory(r.Check)
	}
	var roce, bad, good []string
	var netdevs []string
	for _, p := range e.inv.Ports {
		if p.LinkLayer != discovery.LinkLayerEthernet {
			continue
		}
		id := fmt.Sprintf("%s/%d", p.IBDev, p.Port)
		roce = append(roce, id)
		if p.GIDIndex != nil {
			good = append(good, fmt.Sprintf("%s index %d", id, *p.GIDIndex))
			continue
		}
		why := "no RoCE v2 entry with an IPv4 or global IPv6 address"
		if t, err := discovery.ReadGIDTable(e.h.SysfsRoot, p.IBDev, p.Port); err == nil {
			why = t.Reason
		}
		nd := p.Netdev
		if nd == "" {
			nd = "no netdev"
		} else {
			netdevs = appendOnce(netdevs, nd)
		}
		bad = append(bad, fmt.Sprintf("%s (%s): %s", id, nd, why))
	}
	switch {
	case len(roce) == 0:
		r.Status, r.Found = Skip, "no RoCE (Ethernet) ports"
	case len(bad) == 0:
		r.Status, r.Found = OK, fmt.Sprintf("every RoCE port has a RoCE v2 GID: %s", strings.Join(good, ", "))
	default:
		r.Status = Warn
		r.Found = fmt.Sprintf("%d of %d RoCE ports have no usable GID: %s; the driver publishes no gid_index for them and NCCL_IB_GID_INDEX will not be set",
			len(bad), len(roce), strings.Join(bad, "; "))
		target := "the port's netdev"
		if len(netdevs) > 0 {
			target = strings.Join(netdevs, ", ")
		}
		r.Fix = fmt.Sprintf("Give %s an IPv4 or global IPv6 address (ip addr add ADDR/PREFIX dev NETDEV); rdma-dra discover --gids shows the GID tables.", target)
	}
	return r
}

// checkGPUDirect reports how each RDMA port can reach GPU memory for GPUDirect RDMA, by
// the rule discovery publishes as the port's gpudirect attribute (the one function
// discovery.GPUDriver.GPUDirect): dma-buf with NVIDIA's open kernel modules, peer memory
// with nvidia_peermem, or neither, where NCCL stages GPU data through host memory.
func checkGPUDirect(e *env) Result {
	r := Result{Check: CheckGPUDirect}
	if e.fs == nil {
		return e.noInventory(r.Check)
	}
	d, taintErr := discovery.ReadGPUDriver(e.fs)
	if !d.Loaded {
		r.Status, r.Found = Skip, "no NVIDIA driver loaded (no module/nvidia)"
		return r
	}
	if e.inv == nil {
		return e.noInventory(r.Check)
	}
	counts := map[string]int{}
	var without, fixes []string
	hardware := 0
	for i := range e.inv.Ports {
		p := &e.inv.Ports[i]
		if p.Virtual {
			continue // no DMA engine of its own: never a way, and nothing to fix
		}
		hardware++
		mode, why := d.GPUDirect(p)
		if mode != "" {
			counts[mode]++
			continue
		}
		without = append(without, fmt.Sprintf("%s/%d: %s", p.IBDev, p.Port, why))
		fixes = appendOnce(fixes, gpuDirectFix(p))
	}
	if hardware == 0 {
		r.Status, r.Found = Skip, "no RDMA port of a PCI device: a virtual device (soft-RoCE, soft-iWARP) cannot reach GPU memory"
		return r
	}
	var ways []string
	for _, mode := range []string{discovery.GPUDirectDMABuf, discovery.GPUDirectPeermem} {
		if counts[mode] > 0 {
			ways = append(ways, fmt.Sprintf("gpudirect=%s on %s", mode, plural(counts[mode], "port")))
		}
	}
	if counts[discovery.GPUDirectDMABuf] > 0 && d.Peermem {
		ways = append(ways, "nvidia_peermem is loaded too, and NCCL prefers dma-buf")
	}
	if taintErr != nil {
		ways = append(ways, fmt.Sprintf("%v, so the NVIDIA modules count as proprietary", taintErr))
	}
	if len(without) == 0 {
		r.Status, r.Found = OK, strings.Join(ways, "; ")
		return r
	}
	r.Status = Warn
	r.Found = fmt.Sprintf("%d of %s without GPUDirect RDMA, where NCCL stages GPU data through host memory: %s",
		len(without), plural(hardware, "port"), strings.Join(without, "; "))
	if len(ways) > 0 {
		r.Found += "; " + strings.Join(ways, "; ")
	}
	r.Fix = strings.Join(fixes, " ")
	return r
}

// gpuDirectFix is what gives port p, which has none, a way to GPU memory.
func gpuDirectFix(p *discovery.Port) string {
	if discovery.RegistersGPUMemory(p.Driver) {
		return modulesLoadFix([]string{"nvidia_peermem"}) + " (it ships with the NVIDIA driver), or install NVIDIA's open kernel modules, whose dma-buf needs no extra module."
	}
	drv := p.Driver
	if drv == "" {
		drv = "an unknown driver"
	}
	return fmt.Sprintf("Ports of %s are not known to register GPU memory (docs/sysfs.md lists the drivers that are); NCCL_DEBUG=INFO shows whether NCCL finds a way of its own.", drv)
}

// checkIBDev2Netdev lists each port the way ibdev2netdev prints it, from discovery's
// inventory (the netdev and its operstate that rdma-dra discover shows as NETDEV and OPER).
func checkIBDev2Netdev(e *env) Result {
	r := Result{Check: CheckIBDev2Netdev}
	if e.inv == nil {
		return e.noInventory(r.Check)
	}
	ports := e.inv.Ports
	if len(ports) == 0 {
		r.Status, r.Found = Skip, "no RDMA ports"
		return r
	}
	with := 0
	for _, p := range ports {
		line := fmt.Sprintf("%s port %d ==> ", p.IBDev, p.Port)
		if p.Netdev == "" {
			line += "(none)"
		} else {
			with++
			state := "Down"
			if p.NetdevOperState == "up" {
				state = "Up"
			}
			line += fmt.Sprintf("%s (%s)", p.Netdev, state)
		}
		r.Details = append(r.Details, line)
	}
	r.Status = OK
	r.Found = fmt.Sprintf("%s, %d with a netdev", plural(len(ports), "port"), with)
	return r
}

// plural is "1 port" or "2 ports".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
