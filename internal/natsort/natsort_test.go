package natsort

import "testing"

func TestCompare(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"mlx5_2", "mlx5_10", -1}, {"mlx5_10", "mlx5_2", 1}, {"mlx5_10", "mlx5_10", 0},
		{"mlx5_9", "mlx5_bond_0", -1}, {"a01", "a1", -1}, {"ib", "ib0", -1}, {"irdma1", "mlx5_0", -1},
	} {
		if got := Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
