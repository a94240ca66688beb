package bench

import (
	"fmt"
	"strings"
)

// writeReference writes the comparison with the reference driver.
func writeReference(b *strings.Builder, r *Results) {
	c := r.Details.Reference
	if c == nil || len(c.DriverCycles) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Against the reference driver: `prepare_p50_ratio_vs_reference_c1`, `cycles_ratio_vs_reference_default_limits`, `status_updates_dropped`\n\n")
	fmt.Fprintf(b, "The reference is %s: its kubelet plugin built from the Go module proxy at the version "+
		"`test/bench/reference/go.mod` pins, with its own Kubernetes libraries (%s; it does not compile against "+
		"v0.37.1, see that go.mod). "+
		"Both plugins run at once on the same etcd and API server, with the same client limits "+
		"(%d QPS, burst %d: this driver's defaults, the kubelet's), their data directories on the same disk and "+
		"their CDI directories on the same tmpfs (this driver's device metadata files too, where its chart puts "+
		"them on a node; the reference writes none); one-device claims (one share of an RDMA port here, one whole GPU "+
		"there), prepared and unprepared back to back over the DRA socket. %d rounds, alternating which driver "+
		"goes first (A B, B A); medians of the rounds. The 1-concurrent load is %d cycles after a pause that "+
		"refills the client's token bucket: within the burst, it measures the plugin, as for one pod on a quiet node. "+
		"The %d-concurrent load runs %g s, past the burst, after the same pause, so both plugins start it with a full "+
		"bucket and are then held to the same %d requests per second; each prepare costs both the helper's GET of "+
		"the claim, so at this limit the two can at best tie. This driver's cycles/s count the time its "+
		"status writer still needed afterwards to have every prepared claim's status written (zero when nothing "+
		"was pending).\n\n",
		c.Reference, "k8s.io v0.36.2", defaultQPS, defaultBurst, c.Rounds, c.C1Cycles, compareConcurrency, c.LoadSeconds, defaultQPS)
	fmt.Fprintf(b, "| figure | this driver | reference | ratio |\n|---|---|---|---|\n")
	dp, rp := median(c.DriverPrepareP50C1), median(c.ReferencePrepareP50C1)
	fmt.Fprintf(b, "| prepare p50, 1 concurrent | %.3g ms | %.3g ms | %.2f |\n", dp, rp, dp/rp)
	dc, rc := median(c.DriverCycles), median(c.ReferenceCycles)
	fmt.Fprintf(b, "| cycles/s, %d concurrent | %.3g | %.3g | %.2f |\n", compareConcurrency, dc, rc, dc/rc)
	fmt.Fprintf(b, "| status writer busy after a load (median) | %.3g ms | n/a | |\n", median(c.StatusDrainMS))
	fmt.Fprintf(b, "\nPer round (ms p50 at 1 concurrent; cycles/s at %d): this driver %s / %s; reference %s / %s.\n",
		compareConcurrency, joinFloats(c.DriverPrepareP50C1), joinFloats(c.DriverCycles), joinFloats(c.ReferencePrepareP50C1), joinFloats(c.ReferenceCycles))
	if c.StatusChecked > 0 {
		fmt.Fprintf(b, "\nClaim status: at the end every claim of this driver's node (%d) was prepared once more; after the status "+
			"writer drained, %d of them lacked their `status.devices` in the API server, and the plugin counted %g updates "+
			"refused for good over the whole run (`rdma_dra_claim_status_updates_total{result=\"failed\"}`).\n",
			c.StatusChecked, c.StatusMissing, c.StatusFailed)
	}
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.3g", x)
	}
	return strings.Join(s, ", ")
}
