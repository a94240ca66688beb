package scale

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// workers is how many API calls the harness makes at once when it sets up a cluster.
const workers = 32

// parallel calls f for 0..n-1 on workers goroutines and returns the first error.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	return parallelN(ctx, n, workers, f)
}

// parallelN is parallel on w goroutines.
func parallelN(ctx context.Context, n, w int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(w)
	for i := range n {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}
