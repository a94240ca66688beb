package bench

import (
	"slices"
	"time"
)

// Summary describes a sample of durations, in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// Summarize sorts a copy of ds and returns its quantiles (nearest rank). An empty sample
// gives a zero Summary.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N:    len(s),
		Mean: ms(sum / time.Duration(len(s))),
		P50:  ms(quantile(s, 0.50)),
		P90:  ms(quantile(s, 0.90)),
		P99:  ms(quantile(s, 0.99)),
		Max:  ms(s[len(s)-1]),
	}
}

// quantile is the nearest-rank q-quantile of a sorted, non-empty sample.
func quantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(q*float64(len(sorted))+0.999999999) - 1
	rank = min(max(rank, 0), len(sorted)-1)
	return sorted[rank]
}

// ms is d in milliseconds, rounded to microseconds so that reports are stable to read.
func ms(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Millisecond)
}
