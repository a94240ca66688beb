package portcounters

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of a Cache.
const (
	// DefaultMaxAge is how long a reading serves scrapes: two Prometheus servers of an
	// HA pair, or a scrape and a person with curl, share a read, and the adapters'
	// firmware, which answers every read of counters/, is asked at most every 5 s.
	DefaultMaxAge = 5 * time.Second
	// DefaultWait bounds how long a scrape waits for a read, well within Prometheus'
	// default scrape timeout of 10 s.
	DefaultWait = 2 * time.Second
)

// CacheOptions configure a Cache.
type CacheOptions struct {
	// MaxAge is how long a reading is served before the next caller reads again;
	// default DefaultMaxAge.
	MaxAge time.Duration
	// Wait is how long a caller waits for a read; default DefaultWait.
	Wait time.Duration
	// Clock is the clock of ages and waits; nil is the real clock.
	Clock clock.Clock
	// Done is told about every completed read, for the read metrics; nil is nobody.
	Done func(Reading)
}

// Cache serves readings to concurrent callers (scrapes) at a bounded cost: a reading is
// reused for MaxAge, callers that need a new one while a read is running share that
// read, and no caller waits for it longer than Wait.
//
// Invariants: at most one read runs at a time; last only moves forward. A read that
// hangs (an adapter whose firmware does not answer) holds one goroutine and no lock;
// callers meanwhile get the last complete reading, marked stale.
type Cache struct {
	read func() Reading
	opts CacheOptions

	mu       sync.Mutex
	last     Reading
	have     bool
	inflight chan struct{} // closed when the running read is done; nil when none runs
}

// NewCache returns a cache of the readings read returns (Reader.Read).
func NewCache(read func() Reading, opts CacheOptions) *Cache {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Cache{read: read, opts: opts}
}

// Get returns a reading no older than MaxAge, reading the ports when there is none. When
// the read takes longer than Wait it returns the last complete reading instead (the zero
// Reading before the first) and stale true; the read goes on and serves later callers.
func (c *Cache) Get() (r Reading, stale bool) {
	c.mu.Lock()
	if c.have && c.opts.Clock.Since(c.last.At) < c.opts.MaxAge {
		r = c.last
		c.mu.Unlock()
		return r, false
	}
	if c.inflight == nil {
		c.inflight = make(chan struct{})
		go c.readNow(c.inflight)
	}
	done := c.inflight
	c.mu.Unlock()

	timer := c.opts.Clock.NewTimer(c.opts.Wait)
	defer timer.Stop()
	select {
	case <-done:
		stale = false
	case <-timer.C():
		stale = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, stale
}

// readNow reads, keeps the reading and closes done.
func (c *Cache) readNow(done chan struct{}) {
	start := c.opts.Clock.Now()
	r := c.read()
	r.At = c.opts.Clock.Now()
	r.Duration = r.At.Sub(start)
	if c.opts.Done != nil {
		c.opts.Done(r)
	}
	c.mu.Lock()
	c.last, c.have = r, true
	c.inflight = nil
	c.mu.Unlock()
	close(done)
}
