// Package natsort orders names the way a person reads them: digit runs compare as
// numbers, so mlx5_2 comes before mlx5_10. Discovery, the device model, the mock nodes'
// expectations and the CLI share it, so every listing of ports has one order.
package natsort

import (
	"cmp"
	"strings"
)

// Compare compares a and b with their digit runs compared as numbers. Names that differ
// only in leading zeros of a number are ordered as strings, so the order is total.
func Compare(a, b string) int {
	x, y := a, b
	for x != "" && y != "" {
		dx, dy := digits(x), digits(y)
		if dx > 0 && dy > 0 {
			nx, ny := strings.TrimLeft(x[:dx], "0"), strings.TrimLeft(y[:dy], "0")
			if c := cmp.Or(cmp.Compare(len(nx), len(ny)), cmp.Compare(nx, ny)); c != 0 {
				return c
			}
			x, y = x[dx:], y[dy:]
			continue
		}
		if x[0] != y[0] {
			return cmp.Compare(x[0], y[0])
		}
		x, y = x[1:], y[1:]
	}
	return cmp.Or(cmp.Compare(len(x), len(y)), cmp.Compare(a, b))
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
