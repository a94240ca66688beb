package controller

import (
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// celCache keeps what syncs derive from CEL, so that a sync of an unchanged pool
// compiles nothing: the expression ClassCEL generates for each pool's spec, and the
// compiled programs by expression. It holds only the live expressions, the generated
// one and the class's of each pool it knows: a program no pool refers to any more is
// dropped at once, so the cache is bounded by twice the number of pools.
type celCache struct {
	driverName string

	mu       sync.Mutex
	pools    map[string]*poolExpressions
	programs map[string]compiled
	// compilations counts ClassCEL and CompileSelector calls, for tests.
	compilations int
}

// poolExpressions are the expressions of one pool.
type poolExpressions struct {
	// spec is what generated expr, or err when the spec cannot be expressed; generated
	// says whether desired has run for the pool yet.
	generated bool
	spec      v1alpha1.RdmaPoolSpec
	expr      string
	err       error
	// class is the expression of the DeviceClass the pool was last counted with.
	class string
}

type compiled struct {
	result dracel.CompilationResult
	err    error
}

func newCELCache(driverName string) *celCache {
	return &celCache{driverName: driverName, pools: map[string]*poolExpressions{}, programs: map[string]compiled{}}
}

// desired returns the CEL selector of the pool's DeviceClass, compiled as the API server
// would, or why there is none: ClassCEL and CompileSelector, run again only when the
// pool's spec changed (the pool's name, which a legacy pool's selector has, is the
// cache's key).
func (c *celCache) desired(pool *v1alpha1.RdmaPool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pools[pool.Name]
	if e != nil && e.generated && apiequality.Semantic.DeepEqual(e.spec, pool.Spec) {
		return e.expr, e.err
	}
	expr, err := ClassCEL(c.driverName, pool)
	c.compilations++
	if err == nil {
		_, err = c.compileLocked(expr)
	}
	if err != nil {
		expr = ""
	}
	if e == nil {
		e = &poolExpressions{}
		c.pools[pool.Name] = e
	}
	e.generated, e.spec, e.expr, e.err = true, *pool.Spec.DeepCopy(), expr, err
	c.pruneLocked()
	return expr, err
}

// class returns the compiled selector of the pool's DeviceClass and remembers it as the
// pool's; an empty expression says the pool has no class of its own.
func (c *celCache) class(pool, expr string) (dracel.CompilationResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pools[pool]
	if e == nil {
		e = &poolExpressions{}
		c.pools[pool] = e
	}
	var out compiled
	if expr != "" {
		out.result, out.err = c.compileLocked(expr)
	}
	if e.class != expr {
		e.class = expr
		c.pruneLocked()
	}
	return out.result, out.err
}

// forget drops the expressions of a pool that is gone.
func (c *celCache) forget(pool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pools, pool)
	c.pruneLocked()
}

func (c *celCache) compileLocked(expr string) (dracel.CompilationResult, error) {
	if p, ok := c.programs[expr]; ok {
		return p.result, p.err
	}
	res, err := CompileSelector(expr)
	c.compilations++
	c.programs[expr] = compiled{result: res, err: err}
	return res, err
}

// pruneLocked drops the programs that no pool refers to.
func (c *celCache) pruneLocked() {
	for expr := range c.programs {
		live := false
		for _, e := range c.pools {
			if e.expr == expr || e.class == expr {
				live = true
				break
			}
		}
		if !live {
			delete(c.programs, expr)
		}
	}
}
