package framework

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetricSamples(t *testing.T) {
	text := strings.Join([]string{
		`# HELP rdma_dra_port_transmit_bytes_total [ALPHA] Bytes.`,
		`# TYPE rdma_dra_port_transmit_bytes_total counter`,
		`rdma_dra_port_transmit_bytes_total{claim="",claim_namespace="",ibdev="mlx5_8",link_layer="Ethernet",node="n",port="1"} 4.000000008e+09`,
		`rdma_dra_port_transmit_bytes_total{claim="whole-x",claim_namespace="ns",ibdev="mlx5_9",link_layer="Ethernet",node="n",port="1"} 28`,
		`rdma_dra_port_transmit_bytes_total_other{ibdev="mlx5_9"} 1`,
		`rdma_dra_build_info{git_commit="a\"b\\c",version="v"} 1`,
		`rdma_dra_publish_total 3`,
	}, "\n")
	for _, tt := range []struct {
		name  string
		match map[string]string
		want  []Sample
	}{
		{"rdma_dra_port_transmit_bytes_total", map[string]string{"ibdev": "mlx5_9"}, []Sample{{
			Labels: map[string]string{"claim": "whole-x", "claim_namespace": "ns", "ibdev": "mlx5_9", "link_layer": "Ethernet", "node": "n", "port": "1"}, Value: 28}}},
		{"rdma_dra_port_transmit_bytes_total", map[string]string{"claim": ""}, []Sample{{
			Labels: map[string]string{"claim": "", "claim_namespace": "", "ibdev": "mlx5_8", "link_layer": "Ethernet", "node": "n", "port": "1"}, Value: 4000000008}}},
		{"rdma_dra_build_info", nil, []Sample{{Labels: map[string]string{"git_commit": `a"b\c`, "version": "v"}, Value: 1}}},
		{"rdma_dra_publish_total", nil, []Sample{{Labels: map[string]string{}, Value: 3}}},
		{"rdma_dra_port_transmit_bytes_total", map[string]string{"ibdev": "mlx5_0"}, nil},
	} {
		got, err := MetricSamples(text, tt.name, tt.match)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("MetricSamples(%s, %v) (-want +got):\n%s", tt.name, tt.match, diff)
		}
	}
	if _, err := MetricSamples(`x{a="b} 1`, "x", nil); err == nil {
		t.Error("an unterminated label value parses")
	}
}
