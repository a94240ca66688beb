package mocknode

import (
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strconv"
	"strings"
)

// The counter directories of a port, as the kernel's RDMA core creates them
// (drivers/infiniband/core/sysfs.c):
//
//   - counters/ holds the InfiniBand PortCounters (and, where the adapter reports them,
//     PortCountersExtended) that the kernel asks the adapter's performance management
//     agent for on every read. Only drivers that answer management datagrams have it:
//     mlx4 and mlx5 on both link layers, not soft-RoCE, irdma or bnxt_re. The error
//     counters have the widths of the specification and stop at their maximum instead
//     of wrapping; data and packet counters are 64 bits. port_xmit_data and
//     port_rcv_data count 4-byte words, not bytes.
//   - hw_counters/ holds the driver's own counters, one file each, plus lifespan, the
//     milliseconds for which a read is served from the driver's cache (not a counter).
//     The names are the driver's: mlx5's queue counters (32 bits, they wrap) and, on
//     RoCE, its congestion counters (64 bits); soft-RoCE's (64 bits).
//
// Every file holds one unsigned decimal number.
const (
	CountersDir   = "counters"
	HWCountersDir = "hw_counters"
	// LifespanFile is hw_counters/lifespan; the kernel's default is 10 ms.
	LifespanFile = "lifespan"
)

// counterKind says what a counter counts, for its plausible value.
type counterKind int

const (
	kindData    counterKind = iota // 4-byte words of traffic
	kindPackets                    // packets of traffic
	kindOps                        // operations such as RDMA reads received
	kindCNP                        // congestion notifications and ECN marks, RoCE only
	kindErrors                     // errors that a healthy port sees a few of
	kindRare                       // errors a healthy port does not see
)

// counterDef is one counter file.
type counterDef struct {
	name string
	bits int
	kind counterKind
}

// pmaCounters are the files of counters/ with the extended counters, sorted.
var pmaCounters = []counterDef{
	{"VL15_dropped", 16, kindRare},
	{"excessive_buffer_overrun_errors", 4, kindRare},
	{"link_downed", 8, kindErrors},
	{"link_error_recovery", 8, kindErrors},
	{"local_link_integrity_errors", 4, kindRare},
	{"multicast_rcv_packets", 64, kindPackets},
	{"multicast_xmit_packets", 64, kindPackets},
	{"port_rcv_constraint_errors", 8, kindRare},
	{"port_rcv_data", 64, kindData},
	{"port_rcv_errors", 16, kindErrors},
	{"port_rcv_packets", 64, kindPackets},
	{"port_rcv_remote_physical_errors", 16, kindRare},
	{"port_rcv_switch_relay_errors", 16, kindRare},
	{"port_xmit_constraint_errors", 8, kindRare},
	{"port_xmit_data", 64, kindData},
	{"port_xmit_discards", 16, kindErrors},
	{"port_xmit_packets", 64, kindPackets},
	{"port_xmit_wait", 32, kindOps},
	{"symbol_error", 16, kindErrors},
	{"unicast_rcv_packets", 64, kindPackets},
	{"unicast_xmit_packets", 64, kindPackets},
}

// mlx5Counters are mlx5's hw_counters on every port: its queue counters, 32 bits wide.
var mlx5Counters = []counterDef{
	{"duplicate_request", 32, kindErrors},
	{"implied_nak_seq_err", 32, kindErrors},
	{"local_ack_timeout_err", 32, kindErrors},
	{"out_of_buffer", 32, kindErrors},
	{"out_of_sequence", 32, kindErrors},
	{"packet_seq_err", 32, kindErrors},
	{"req_cqe_error", 32, kindRare},
	{"req_cqe_flush_error", 32, kindRare},
	{"req_remote_access_errors", 32, kindRare},
	{"req_remote_invalid_request", 32, kindRare},
	{"resp_cqe_error", 32, kindRare},
	{"resp_cqe_flush_error", 32, kindRare},
	{"resp_local_length_error", 32, kindRare},
	{"resp_remote_access_errors", 32, kindRare},
	{"rnr_nak_retry_err", 32, kindErrors},
	{"rx_atomic_requests", 32, kindOps},
	{"rx_dct_connect", 32, kindRare},
	{"rx_read_requests", 32, kindOps},
	{"rx_write_requests", 32, kindOps},
}

// mlx5RoCECounters are the hw_counters mlx5 adds on Ethernet ports: the RoCE
// acceleration counters (32 bits) and the congestion control counters (64 bits).
var mlx5RoCECounters = []counterDef{
	{"np_cnp_sent", 64, kindCNP},
	{"np_ecn_marked_roce_packets", 64, kindCNP},
	{"roce_adp_retrans", 32, kindRare},
	{"roce_adp_retrans_to", 32, kindRare},
	{"roce_slow_restart", 32, kindRare},
	{"roce_slow_restart_cnps", 32, kindRare},
	{"roce_slow_restart_trans", 32, kindRare},
	{"rp_cnp_handled", 64, kindCNP},
	{"rp_cnp_ignored", 64, kindRare},
	{"rx_icrc_encapsulated", 64, kindRare},
}

// rxeCounters are soft-RoCE's hw_counters, 64 bits wide; it has no counters/.
var rxeCounters = []counterDef{
	{"ack_deferred", 64, kindOps},
	{"completer_retry_err", 64, kindRare},
	{"duplicate_request", 64, kindErrors},
	{"link_downed", 64, kindErrors},
	{"out_of_seq_request", 64, kindErrors},
	{"rcvd_pkts", 64, kindPackets},
	{"rcvd_rnr_err", 64, kindRare},
	{"rcvd_seq_err", 64, kindErrors},
	{"rdma_recvs", 64, kindOps},
	{"rdma_sends", 64, kindOps},
	{"retry_exceeded_err", 64, kindRare},
	{"retry_rnr_exceeded_err", 64, kindRare},
	{"send_err", 64, kindRare},
	{"send_rnr_err", 64, kindRare},
	{"sent_pkts", 64, kindPackets},
}

// defaultLifespan is hw_counters/lifespan as the kernel sets it (RDMA_HW_STATS_DEFAULT_LIFESPAN).
const defaultLifespan = "10"

// counterSets returns the counters/ and hw_counters/ files a port of d has, each sorted,
// from the driver of d's PCI function (drivers maps an address to its driver) or, for a
// virtual device, from its name: the kernel creates a directory only where the driver
// provides its counters, so a nil list means no directory.
func counterSets(d *RDMADevice, p *Port, drivers map[string]string) (pma, hw []counterDef) {
	switch {
	case d.PCI == "" && strings.HasPrefix(d.Name, "rxe"):
		return nil, rxeCounters
	case d.PCI == "":
		return nil, nil // siw and other virtual devices
	}
	switch drivers[d.PCI] {
	case "mlx5_core":
		hw = slices.Clone(mlx5Counters)
		if p.LinkLayer == "Ethernet" {
			hw = append(hw, mlx5RoCECounters...)
			slices.SortFunc(hw, func(a, b counterDef) int { return strings.Compare(a.name, b.name) })
		}
		return pmaCounters, hw
	case "mlx4_core":
		return pmaCounters, nil
	}
	return nil, nil // irdma, bnxt_re: their counters are not modelled
}

// maxValue is the largest value a counter of that many bits holds.
func maxValue(bits int) uint64 {
	if bits >= 64 {
		return 1<<64 - 1
	}
	return 1<<bits - 1
}

// plausibleValue is a counter's value when the description does not set one: derived
// from the port and the counter's name alone, so that writing a node twice gives the
// same tree, and in the range such a counter has on a node that has been up for a while.
// A port that is not ACTIVE has carried little traffic.
func plausibleValue(ibdev string, p *Port, c counterDef) uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%d/%s", ibdev, p.Number, c.name)
	seed := h.Sum64()
	active := p.State == "ACTIVE"
	var v uint64
	switch c.kind {
	case kindData:
		v = seed % 1_000_000
		if active {
			v += 50_000_000_000 + seed%5_000_000_000_000
		}
	case kindPackets:
		v = seed % 10_000
		if active {
			v += 100_000_000 + seed%2_000_000_000
		}
	case kindOps:
		v = seed % 100_000_000
	case kindCNP:
		v = seed % 500_000
	case kindErrors:
		v = seed % 3
	case kindRare:
		v = 0
	}
	return min(v, maxValue(c.bits))
}

// validateCounters checks a port's counter overrides against the files its device has.
func validateCounters(d *RDMADevice, p *Port, drivers map[string]string) []error {
	if len(p.Counters) == 0 {
		return nil
	}
	pma, hw := counterSets(d, p, drivers)
	var errs []error
	for _, name := range sortedKeys(p.Counters) {
		v := p.Counters[name]
		found := false
		for _, set := range [][]counterDef{pma, hw} {
			i := slices.IndexFunc(set, func(c counterDef) bool { return c.name == name })
			if i < 0 {
				continue
			}
			found = true
			if v > maxValue(set[i].bits) {
				errs = append(errs, fmt.Errorf("port %d: counter %s is %d bits wide, %d does not fit", p.Number, name, set[i].bits, v))
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("port %d: the port has no counter %s (its driver's counters: %s)", p.Number, name, counterNames(pma, hw)))
		}
	}
	return errs
}

func counterNames(sets ...[]counterDef) string {
	var names []string
	for _, set := range sets {
		for _, c := range set {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// layoutCounters writes a port's counters/ and hw_counters/ below its directory dir.
func layoutCounters(t *tree, dir string, d *RDMADevice, p *Port, drivers map[string]string) {
	pma, hw := counterSets(d, p, drivers)
	value := func(c counterDef) string {
		if v, ok := p.Counters[c.name]; ok {
			return strconv.FormatUint(v, 10)
		}
		return strconv.FormatUint(plausibleValue(d.Name, p, c), 10)
	}
	for _, c := range pma {
		t.file(path.Join(dir, CountersDir, c.name), value(c))
	}
	if hw != nil {
		for _, c := range hw {
			t.file(path.Join(dir, HWCountersDir, c.name), value(c))
		}
		t.file(path.Join(dir, HWCountersDir, LifespanFile), defaultLifespan)
	}
}
