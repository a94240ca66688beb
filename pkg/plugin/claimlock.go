package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
)

// Locking of prepare and unprepare.
//
// The helper runs gRPC calls concurrently (kubeletplugin.Serialize(false)), so the driver
// does its own locking, at two levels, always taken in this order:
//
//  1. A lock per claim UID (claimLocks), held for a whole prepare or unprepare of the
//     claims of one call. It keeps a claim from being prepared or unprepared
//     concurrently with itself: by two calls of the kubelet (two pods that share a claim
//     start at once), or by the other plugin instance during a rolling update, which is
//     why it is an flock(2) on a file per claim besides the in-process lock. The claims
//     of one call are locked in sorted UID order, so two calls never deadlock. CDI spec
//     writes and removals happen under this lock only.
//  2. The checkpoint store's lock (mutex + flock of checkpoint.lock), taken by the
//     store's group commit (checkpoint.Store.Update) for the short time it loads, applies
//     the queued changes and saves. Everything that needs a node-wide view happens here
//     and nowhere else: the overlap check and the reservation of the devices (recording
//     PrepareStarted) are one step, so two claims racing for one exclusive device cannot
//     both pass the check.
//
// Nothing waits for a claim lock while holding the store's lock. The cleanup loop takes
// claim locks only with tryLock and skips claims that are busy.

// claimLockPoll is how often a claim lock held by another process is tried again.
const claimLockPoll = 2 * time.Millisecond

// claimLocks locks claims by UID within this process and, through files in dir, across
// the plugin instances that share the data directory.
type claimLocks struct {
	dir string
	// clock paces the polls of a lock file that another process holds.
	clock clock.Clock

	mu sync.Mutex
	// held maps a UID to the in-process lock of a claim that is locked or waited for;
	// the entry goes when its last user is done, so the map does not grow with claims.
	held map[string]*claimMutex
}

// claimMutex is a lock that waiting can be given up on: a token in a channel of one.
type claimMutex struct {
	token chan struct{}
	users int // guarded by claimLocks.mu
}

func newClaimLocks(dir string) (*claimLocks, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create claim lock directory: %w", err)
	}
	return &claimLocks{dir: dir, clock: clock.RealClock{}, held: map[string]*claimMutex{}}, nil
}

// heldClaims is a set of locked claims; release unlocks them.
type heldClaims struct {
	locks *claimLocks
	uids  []string
	files map[string]*lockedFile
}

// lock locks the claims uids (in any order, duplicates allowed) for one call. It waits
// until ctx ends; then it returns ctx's error and holds nothing.
func (l *claimLocks) lock(ctx context.Context, uids []string) (*heldClaims, error) {
	sorted := slices.Clone(uids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	h := &heldClaims{locks: l, files: make(map[string]*lockedFile, len(sorted))}
	for _, uid := range sorted {
		if err := l.lockOne(ctx, uid, h, true); err != nil {
			h.release(nil)
			return nil, err
		}
	}
	return h, nil
}

// tryLock locks one claim if nobody holds it, without waiting; nil when busy.
func (l *claimLocks) tryLock(ctx context.Context, uid string) *heldClaims {
	h := &heldClaims{locks: l, files: map[string]*lockedFile{}}
	if err := l.lockOne(ctx, uid, h, false); err != nil {
		return nil
	}
	return h
}

var errBusy = errors.New("claim is locked")

func (l *claimLocks) lockOne(ctx context.Context, uid string, h *heldClaims, wait bool) error {
	l.mu.Lock()
	m := l.held[uid]
	if m == nil {
		m = &claimMutex{token: make(chan struct{}, 1)}
		l.held[uid] = m
	}
	m.users++
	l.mu.Unlock()
	acquired := false
	defer func() {
		if !acquired {
			l.done(uid, m)
		}
	}()
	select {
	case m.token <- struct{}{}:
	default:
		if !wait {
			return errBusy
		}
		select {
		case m.token <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var f *lockedFile
	if cdi.ValidateClaimUID(uid) == nil {
		// A UID that is no valid file name cannot have a spec or a checkpoint entry
		// (the CDI writer refuses it), so the in-process lock is enough for it.
		var err error
		if f, err = lockFile(ctx, l.clock, filepath.Join(l.dir, uid+".lock"), wait); err != nil {
			<-m.token
			return err
		}
	}
	acquired = true
	h.uids = append(h.uids, uid)
	h.files[uid] = f
	return nil
}

// done drops one user of the in-process lock of uid.
func (l *claimLocks) done(uid string, m *claimMutex) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m.users--
	if m.users == 0 {
		delete(l.held, uid)
	}
}

// release unlocks the claims. The lock files of the UIDs in forget are removed first,
// while still locked (claims that are gone from the node; see lockFile for why that is
// safe).
func (h *heldClaims) release(forget map[string]bool) {
	for i := len(h.uids) - 1; i >= 0; i-- {
		uid := h.uids[i]
		if f := h.files[uid]; f != nil {
			if forget[uid] {
				_ = os.Remove(f.path)
			}
			f.close()
		}
		h.locks.mu.Lock()
		m := h.locks.held[uid]
		h.locks.mu.Unlock()
		<-m.token
		h.locks.done(uid, m)
	}
	h.uids = nil
}

// lockedFile is a lock file whose flock is held, opened with open(2) itself:
// os.OpenFile would offer it to the runtime's poller and take that back, five more
// system calls per lock for a file that is never read or written.
type lockedFile struct {
	fd   int
	path string
}

// close releases the flock with the descriptor.
func (f *lockedFile) close() { _ = unix.Close(f.fd) }

// lockFile opens path (creating it) and takes an exclusive flock on it. A holder may
// remove the file before it unlocks; whoever was waiting then holds a lock on a file
// that no longer has the name, which guards nothing, so after locking it checks that
// the name still leads to the locked file and starts over if not. That makes removing a
// lock file safe for whoever holds its lock.
func lockFile(ctx context.Context, clk clock.Clock, path string, wait bool) (*lockedFile, error) {
	for {
		fd, err := retryEINTR(func() (int, error) { return unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600) })
		if err != nil {
			return nil, fmt.Errorf("open claim lock: %w", &os.PathError{Op: "open", Path: path, Err: err})
		}
		f := &lockedFile{fd: fd, path: path}
		if err := flockWait(ctx, clk, fd, wait); err != nil {
			f.close()
			return nil, err
		}
		var held, named unix.Stat_t
		if err := unix.Fstat(fd, &held); err != nil {
			f.close()
			return nil, fmt.Errorf("stat claim lock: %w", err)
		}
		err = unix.Stat(path, &named)
		if err == nil && held.Dev == named.Dev && held.Ino == named.Ino {
			return f, nil
		}
		f.close()
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("stat claim lock: %w", err)
		}
		klog.FromContext(ctx).V(5).Info("Claim lock file was replaced while waiting, locking again", "path", path)
	}
}

func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// flockWait takes the flock without blocking a thread: another process holds a claim's
// lock only for one prepare or unprepare, so polling is short and can stop with ctx.
func flockWait(ctx context.Context, clk clock.Clock, fd int, wait bool) error {
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			return fmt.Errorf("lock claim: %w", err)
		case !wait:
			return errBusy
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(claimLockPoll):
		}
	}
}

// sweep removes the lock files of claims nobody holds right now; the cleanup loop calls
// it, so that the files of unprepared claims (which unprepare leaves, see
// Driver.unprepare) do not pile up. A file of an idle prepared claim may go too, which
// costs nothing: the next lock creates it again, and removing is safe under the lock
// (see lockFile).
func (l *claimLocks) sweep(ctx context.Context) int {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		klog.FromContext(ctx).Error(err, "List claim lock files")
		return 0
	}
	removed := 0
	for _, e := range entries {
		uid, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok {
			continue
		}
		if h := l.tryLock(ctx, uid); h != nil {
			h.release(map[string]bool{uid: true})
			removed++
		}
	}
	return removed
}
