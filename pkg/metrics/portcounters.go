package metrics

import (
	"cmp"
	"slices"
	"strconv"
	"sync/atomic"

	"k8s.io/component-base/metrics"

	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// The port counter metrics are read from sysfs when /metrics is scraped
// (portcounters.Cache bounds how often and how long), one series per published port and
// counter. Labels:
//
//   - node, ibdev, port, link_layer name the port;
//   - claim_namespace and claim name the claim that holds the port exclusively, empty
//     while none does. A shared port's series never name its claims: they go to
//     port_claim_info, one series per claim, so that the counters' series stay one per
//     port whatever the number of pods. A port that changes hands starts a new series,
//     whose increase is the traffic during that claim.
//
// The claim's namespace is claim_namespace rather than namespace: Prometheus gives every
// scraped series the target's namespace label (the plugin pod's), and a series' own
// namespace label would be renamed exported_namespace.
var portLabels = []string{"node", "ibdev", "port", "link_layer", "claim_namespace", "claim"}

// PortCounterFamily is one metric family of a named counter.
type PortCounterFamily struct {
	// Name is the metric name without the namespace.
	Name string
	// Counter is the file it is read from.
	Counter portcounters.Counter
	// Scale multiplies the file's value: 4 for the data counters, which count 4-byte words.
	Scale float64
	Help  string
}

// PortCounterFamilies are the families of the named counters, in the order of
// portcounters.Counter.
var PortCounterFamilies = [portcounters.NumCounters]PortCounterFamily{
	{"port_transmit_bytes_total", portcounters.XmitData, 4,
		"Bytes transmitted by the RDMA port on all virtual lanes: counters/port_xmit_data, which counts 4-byte words, times 4."},
	{"port_receive_bytes_total", portcounters.RcvData, 4,
		"Bytes received by the RDMA port on all virtual lanes: counters/port_rcv_data, which counts 4-byte words, times 4."},
	{"port_transmit_packets_total", portcounters.XmitPackets, 1,
		"Packets transmitted by the RDMA port (counters/port_xmit_packets)."},
	{"port_receive_packets_total", portcounters.RcvPackets, 1,
		"Packets received by the RDMA port (counters/port_rcv_packets)."},
	{"port_symbol_errors_total", portcounters.SymbolError, 1,
		"Minor link errors on the RDMA port's physical lanes (counters/symbol_error; 16 bits, stops at 65535)."},
	{"port_link_downed_total", portcounters.LinkDowned, 1,
		"Times the RDMA port's link went down after error recovery failed (counters/link_downed, 8 bits, stops at 255; soft-RoCE: hw_counters/link_downed)."},
	{"port_receive_errors_total", portcounters.RcvErrors, 1,
		"Packets with errors received by the RDMA port (counters/port_rcv_errors)."},
	{"port_transmit_discards_total", portcounters.XmitDiscards, 1,
		"Outbound packets the RDMA port discarded, because the port was down or congested (counters/port_xmit_discards)."},
}

// Names of the port counter collector's other families, without the namespace.
const (
	PortHWStatName    = "port_hw_stat_total"
	PortClaimInfoName = "port_claim_info"
)

// PortClaim is a claim that holds a port, from the plugin's checkpoint.
type PortClaim struct {
	IBDev string
	Port  int
	// Namespace and Name name the ResourceClaim.
	Namespace, Name string
	// Exclusive is true when the claim holds the whole port.
	Exclusive bool
}

// PortCounterSource is what the port counter metrics are served from; the kubelet
// plugin implements it.
type PortCounterSource interface {
	// PortCounters returns the reading to serve and whether it is older than it should
	// be (portcounters.Cache.Get).
	PortCounters() (portcounters.Reading, bool)
	// PortClaims returns the claims that hold ports now.
	PortClaims() []PortClaim
}

// portCounterSource is a source with the node it reads.
type portCounterSource struct {
	node   string
	source PortCounterSource
}

// portCounterCollector serves the port counters of its source when scraped.
type portCounterCollector struct {
	metrics.BaseStableCollector

	named     [portcounters.NumCounters]*metrics.Desc
	hw        *metrics.Desc
	claimInfo *metrics.Desc
	// stale counts the scrapes served an old reading.
	stale *metrics.Counter

	source atomic.Pointer[portCounterSource]
}

func newPortCounterCollector(stale *metrics.Counter) *portCounterCollector {
	c := &portCounterCollector{stale: stale}
	for i, f := range PortCounterFamilies {
		c.named[i] = metrics.NewDesc(Namespace+"_"+f.Name, f.Help, portLabels, nil, Stability, "")
	}
	c.hw = metrics.NewDesc(Namespace+"_"+PortHWStatName,
		"The RDMA port's driver counters (ports/<p>/hw_counters/<counter>, every file but lifespan), named as the driver names them: mlx5's queue and congestion counters (out_of_buffer, np_cnp_sent, rp_cnp_handled, ...), soft-RoCE's.",
		append(slices.Clone(portLabels), "counter"), nil, Stability, "")
	c.claimInfo = metrics.NewDesc(Namespace+"_"+PortClaimInfoName,
		"Always 1: a ResourceClaim prepared on this node holds the RDMA port, exclusive (the whole port) or shared (some of its shares).",
		[]string{"node", "ibdev", "port", "claim_namespace", "claim", "mode"}, nil, Stability, "")
	return c
}

// names returns the full names of the collector's families.
func (c *portCounterCollector) names() []string {
	out := make([]string, 0, len(PortCounterFamilies)+2)
	for _, f := range PortCounterFamilies {
		out = append(out, Namespace+"_"+f.Name)
	}
	return append(out, Namespace+"_"+PortHWStatName, Namespace+"_"+PortClaimInfoName)
}

// DescribeWithStability implements metrics.StableCollector.
func (c *portCounterCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range c.named {
		ch <- d
	}
	ch <- c.hw
	ch <- c.claimInfo
}

type portRef struct {
	ibdev string
	port  int
}

// CollectWithStability implements metrics.StableCollector: it reads (or takes the cached
// reading) and sends a series per port and counter, and one per claim of a port.
func (c *portCounterCollector) CollectWithStability(ch chan<- metrics.Metric) {
	s := c.source.Load()
	if s == nil {
		return
	}
	reading, stale := s.source.PortCounters()
	if stale {
		c.stale.Inc()
	}
	claims := normalizePortClaims(slices.Clone(s.source.PortClaims()))
	holders := exclusiveHolders(claims)
	for i := range reading.Ports {
		pr := &reading.Ports[i]
		holder := holders[portRef{pr.IBDev, pr.Port.Port}]
		labels := []string{s.node, pr.IBDev, strconv.Itoa(pr.Port.Port), pr.LinkLayer, holder.Namespace, holder.Name}
		for j, f := range PortCounterFamilies {
			if pr.Has[f.Counter] {
				ch <- metrics.NewLazyConstMetric(c.named[j], metrics.CounterValue, float64(pr.Values[f.Counter])*f.Scale, labels...)
			}
		}
		if len(pr.HW) > 0 {
			hwLabels := make([]string, len(labels)+1)
			copy(hwLabels, labels)
			for _, hc := range pr.HW {
				hwLabels[len(labels)] = hc.Name
				ch <- metrics.NewLazyConstMetric(c.hw, metrics.CounterValue, float64(hc.Value), hwLabels...)
			}
		}
	}
	for _, pc := range claims {
		mode := "shared"
		if pc.Exclusive {
			mode = "exclusive"
		}
		ch <- metrics.NewLazyConstMetric(c.claimInfo, metrics.GaugeValue, 1, s.node, pc.IBDev, strconv.Itoa(pc.Port), pc.Namespace, pc.Name, mode)
	}
}

// exclusiveHolders returns the claim that holds each port exclusively. Should the
// checkpoint name two (two plugin instances of a rolling update disagreeing for a
// moment), the first by namespace and name is taken, so that a scrape is stable.
func exclusiveHolders(claims []PortClaim) map[portRef]PortClaim {
	out := map[portRef]PortClaim{}
	for _, pc := range claims {
		if !pc.Exclusive {
			continue
		}
		ref := portRef{pc.IBDev, pc.Port}
		if old, ok := out[ref]; ok && cmp.Or(cmp.Compare(old.Namespace, pc.Namespace), cmp.Compare(old.Name, pc.Name)) <= 0 {
			continue
		}
		out[ref] = pc
	}
	return out
}

// normalizePortClaims sorts claims by port, namespace and name and drops repeats (a
// claim with two devices of one port), so that each claim_info series is sent once.
func normalizePortClaims(claims []PortClaim) []PortClaim {
	slices.SortFunc(claims, func(a, b PortClaim) int {
		return cmp.Or(cmp.Compare(a.IBDev, b.IBDev), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name), cmp.Compare(boolInt(a.Exclusive), boolInt(b.Exclusive)))
	})
	return slices.Compact(claims)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// portCounterMetrics are the metrics of reading the port counters themselves.
type portCounterMetrics struct {
	counterReadDuration *metrics.Histogram
	counterReadErrors   *metrics.Counter
	staleScrapes        *metrics.Counter
	portCounters        *portCounterCollector
}

func newPortCounterMetrics() portCounterMetrics {
	stale := metrics.NewCounter(&metrics.CounterOpts{
		Namespace: Namespace, Name: "port_stats_stale_scrapes_total", StabilityLevel: Stability,
		Help: "Scrapes that got port counters older than they should be, because reading sysfs took longer than the scrape may wait.",
	})
	return portCounterMetrics{
		// A read of a node's counters takes milliseconds on a mock tree and, where every
		// counters/ read asks the adapter, up to some hundred milliseconds.
		counterReadDuration: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: Namespace, Name: "port_stats_read_duration_seconds", StabilityLevel: Stability,
			Help:    "Duration of reading the counters of every published RDMA port from sysfs, for a scrape.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
		counterReadErrors: metrics.NewCounter(&metrics.CounterOpts{
			Namespace: Namespace, Name: "port_stats_read_errors_total", StabilityLevel: Stability,
			Help: "Port counter files that exist but could not be read or parsed; their series are left out of that scrape.",
		}),
		staleScrapes: stale,
		portCounters: newPortCounterCollector(stale),
	}
}

func (p portCounterMetrics) registerables() []metrics.Registerable {
	return []metrics.Registerable{p.counterReadDuration, p.counterReadErrors, p.staleScrapes}
}

// ServePortCounters makes /metrics serve the port counters of node from source, read
// when scraped. Until it is called the port counter families have no series.
func (m *Plugin) ServePortCounters(node string, source PortCounterSource) {
	m.portCounters.source.Store(&portCounterSource{node: node, source: source})
}

// ObservePortCounterRead records one completed read of the port counters; it is the
// portcounters.Cache's Done.
func (m *Plugin) ObservePortCounterRead(r portcounters.Reading) {
	m.counterReadDuration.Observe(r.Duration.Seconds())
	m.counterReadErrors.Add(float64(r.Errors))
}
