// Package portcounters reads the traffic and error counters of RDMA ports from sysfs
// (docs/sysfs.md, "Port counters"): the InfiniBand PortCounters of ports/<p>/counters/,
// which the kernel asks the adapter for on every read, and the driver's own counters of
// ports/<p>/hw_counters/. The kubelet plugin serves them as metrics, read when scraped
// through a Cache (pkg/metrics), and its health monitor reads link_downed and
// symbol_error on every poll to find ports that flap (pkg/health).
//
// A Reader is told the ports to read after every scan (Track): it resolves each port's
// directory then, once, and lists its hw_counters. A read follows no symbolic link and
// costs an open, a read and a close per file, and no allocation per value.
//
// Values are passed on as the kernel prints them. A counter that goes down was reset
// (the driver was reloaded, or a 32-bit hardware counter wrapped); Prometheus' rate()
// and increase() take a decrease for a reset, and Delta does the same. The error
// counters of counters/ stop at their maximum instead of wrapping (link_downed at 255,
// symbol_error at 65535), after which they show no increase.
package portcounters

import (
	"time"
)

// Counter is a counter of counters/ that has a meaning of its own: the traffic and the
// errors the kubelet plugin serves as metrics of their own.
type Counter int

// The named counters.
const (
	// XmitData and RcvData count 4-byte words (octets divided by 4), not bytes.
	XmitData Counter = iota
	RcvData
	XmitPackets
	RcvPackets
	// SymbolError counts minor link errors on the physical lanes (16 bits, saturating).
	SymbolError
	// LinkDowned counts the times the link went down after error recovery failed (8
	// bits, saturating). Soft-RoCE has no counters/; its hw_counters/link_downed is read
	// instead.
	LinkDowned
	RcvErrors
	XmitDiscards
	// NumCounters is the number of named counters.
	NumCounters
)

// counterFiles are the file names of the named counters in counters/.
var counterFiles = [NumCounters]string{
	XmitData:     "port_xmit_data",
	RcvData:      "port_rcv_data",
	XmitPackets:  "port_xmit_packets",
	RcvPackets:   "port_rcv_packets",
	SymbolError:  "symbol_error",
	LinkDowned:   "link_downed",
	RcvErrors:    "port_rcv_errors",
	XmitDiscards: "port_xmit_discards",
}

// File returns the counter's file name in counters/, e.g. port_xmit_data.
func (c Counter) File() string { return counterFiles[c] }

// Directory and file names of the counters, relative to a port's directory.
const (
	CountersDir   = "counters"
	HWCountersDir = "hw_counters"
	// lifespanFile is hw_counters/lifespan, how long the driver serves a read from its
	// cache, in milliseconds: a setting, not a counter.
	lifespanFile = "lifespan"
)

// Port names a port to read and the link layer it is published with.
type Port struct {
	IBDev     string
	Port      int
	LinkLayer string
}

// PortReading is what one read found of one port.
type PortReading struct {
	Port
	// Values are the named counters; Has says which of them were read.
	Values [NumCounters]uint64
	Has    [NumCounters]bool
	// HW are the hw_counters that were read, sorted by name, lifespan left out.
	HW []HWCounter
}

// HWCounter is one file of hw_counters/.
type HWCounter struct {
	Name  string
	Value uint64
}

// Reading is one read of every tracked port.
type Reading struct {
	// Ports are the tracked ports in the order of Track, each with what could be read.
	Ports []PortReading
	// Errors counts the counter files that exist but could not be read or parsed; a file
	// that does not exist is no error (drivers and kernels differ in what they have).
	Errors int
	// At is when the read finished and Duration how long it took; set by Cache.
	At       time.Time
	Duration time.Duration
}

// Delta is the increase of a counter from old to now. A decrease is a reset (a reloaded
// driver starts from zero, a 32-bit counter wraps): the counter has counted now since,
// as Prometheus' rate() assumes.
func Delta(old, now uint64) uint64 {
	if now < old {
		return now
	}
	return now - old
}
