package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PortFlappingTaint is the key of the device taint of a port that flaps.
const PortFlappingTaint = "rdma.dra.io/port-flapping"

// PluginMetricsPort is where the plugin serves /metrics: the chart's metrics.port, on the
// node's loopback (metrics.bindHost), which the suite's values keep.
const PluginMetricsPort = 9472

// Counter directories of a port (docs/sysfs.md, "Port counters").
const (
	CountersDir   = "counters"
	HWCountersDir = "hw_counters"
)

// portCounterFile is a counter file of a port of the mock node on the host, through the
// class/infiniband link, which Host.WriteFile resolves.
func (e *Env) portCounterFile(ibdev string, port int, dir, name string) string {
	return filepath.Join(e.paths().SysRoot, "class", "infiniband", ibdev, "ports", strconv.Itoa(port), dir, name)
}

// PortCounter reads a counter file of a port of the mock node.
func (e *Env) PortCounter(ibdev string, port int, dir, name string) (uint64, error) {
	h, err := e.host()
	if err != nil {
		return 0, err
	}
	data, err := h.ReadFile(e.portCounterFile(ibdev, port, dir, name))
	if err != nil {
		return 0, fmt.Errorf("read port counter: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(string(data), "\n"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read port counter %s/%s of %s port %d: %w", dir, name, ibdev, port, err)
	}
	return v, nil
}

// SetPortCounter writes a counter file of a port of the mock node at once, as the kernel
// shows a new value. Counters only go up on a node; a test that lowers one makes the
// plugin see a reset.
func (e *Env) SetPortCounter(ibdev string, port int, dir, name string, v uint64) error {
	h, err := e.host()
	if err != nil {
		return err
	}
	if err := h.WriteFile(e.portCounterFile(ibdev, port, dir, name), []byte(strconv.FormatUint(v, 10)+"\n")); err != nil {
		return fmt.Errorf("write port counter: %w", err)
	}
	return nil
}

// PluginMetrics returns what the plugin serves at /metrics, in the text format.
func (e *Env) PluginMetrics(ctx context.Context) (string, error) {
	h, err := e.host()
	if err != nil {
		return "", err
	}
	body, err := h.GetLoopback(ctx, PluginMetricsPort, "/metrics")
	if err != nil {
		return "", fmt.Errorf("plugin metrics: %w", err)
	}
	return string(body), nil
}

// Sample is one series of a metric in the text format.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// MetricSamples returns the series of the metric name in text (the Prometheus text
// format) whose labels include every one of match.
func MetricSamples(text, name string, match map[string]string) ([]Sample, error) {
	var out []Sample
	for n, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		s := Sample{Labels: map[string]string{}}
		if rest[0] == '{' {
			var err error
			if rest, err = parseLabels(rest[1:], s.Labels); err != nil {
				return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("line %d %q: no value", n+1, line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		s.Value = v
		matches := true
		for k, want := range match {
			if got, ok := s.Labels[k]; !ok || got != want {
				matches = false
			}
		}
		if matches {
			out = append(out, s)
		}
	}
	return out, nil
}

// parseLabels reads `k="v",...}` into labels and returns what follows the brace.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		key, rest, ok := strings.Cut(s, `="`)
		if !ok || key == "" {
			return "", fmt.Errorf("bad label at %q", s)
		}
		var value strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					value.WriteByte('\n')
				default:
					value.WriteByte(rest[i])
				}
				continue
			}
			value.WriteByte(rest[i])
		}
		if i == len(rest) {
			return "", fmt.Errorf("unterminated value of label %s", key)
		}
		labels[key] = value.String()
		s = rest[i+1:]
	}
}

// WaitMetric polls the plugin's /metrics (every 500 ms) until the metric has exactly one
// series with the labels of match and check accepts it, and returns that series.
func (e *Env) WaitMetric(ctx context.Context, timeout time.Duration, name string, match map[string]string, check func(Sample) error) (Sample, error) {
	var found Sample
	err := Poll(ctx, timeout, 500*time.Millisecond, func(ctx context.Context) error {
		text, err := e.PluginMetrics(ctx)
		if err != nil {
			return err
		}
		samples, err := MetricSamples(text, name, match)
		if err != nil {
			return err
		}
		if len(samples) != 1 {
			return fmt.Errorf("%d series of %s with %v, want 1: %+v", len(samples), name, match, samples)
		}
		if err := check(samples[0]); err != nil {
			return fmt.Errorf("%s %v: %w", name, samples[0].Labels, err)
		}
		found = samples[0]
		return nil
	})
	return found, err
}
