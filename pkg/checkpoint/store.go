package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// DefaultBootIDPath is where Linux publishes the ID of the current boot.
const DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"

// spareFileName is the file a save replaced, which the next save writes over and puts in
// place (atomicfile.Spare); its content means nothing.
const spareFileName = "checkpoint.spare"

// lockFileName is locked with flock(2) around every read-modify-write of the checkpoint,
// so that two plugin instances of a rolling update, and the cleanup loop next to a
// prepare call, never interleave.
const lockFileName = "checkpoint.lock"

// Store reads and writes the checkpoint file of one plugin data directory.
type Store struct {
	dir        string
	bootIDPath string
	now        func() time.Time

	// mu serializes users of this process; the flock alone does not, because it is
	// taken on a new open file description each time and this process may hold another.
	// It guards bootID, hooks and the cache.
	mu     sync.Mutex
	bootID string
	hooks  Hooks
	// cached is the checkpoint as last saved or loaded by the committer and cachedData
	// its file content; nil when unknown (see loadCached).
	cached     *Checkpoint
	cachedData []byte

	// queueMu guards the group commit's queue (commit.go); it is never held while
	// waiting for mu.
	queueMu    sync.Mutex
	queue      []*pendingChange
	committing bool
}

// NewStore returns a store for the checkpoint in dir. bootIDPath is normally
// [DefaultBootIDPath]; tests point it at a file of their own.
func NewStore(dir, bootIDPath string) *Store {
	return &Store{dir: dir, bootIDPath: bootIDPath, now: time.Now}
}

// Dir is the directory of the checkpoint, the plugin's data directory.
func (s *Store) Dir() string { return s.dir }

// Path is the checkpoint file's path.
func (s *Store) Path() string { return filepath.Join(s.dir, FileName) }

// BootID returns the current boot ID, read once.
func (s *Store) BootID() (string, error) {
	if s.bootID != "" {
		return s.bootID, nil
	}
	data, err := os.ReadFile(s.bootIDPath)
	if err != nil {
		return "", fmt.Errorf("read boot ID: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", fmt.Errorf("read boot ID: %s is empty", s.bootIDPath)
	}
	s.bootID = id
	return id, nil
}

// Lock takes the store's lock for one transaction (load, change, save) and returns the
// function that releases it.
//
// The lock file is opened with open(2) itself: os.OpenFile would offer it to the
// runtime's poller and take that back, five more system calls on every transaction.
func (s *Store) Lock() (func(), error) {
	s.mu.Lock()
	path := filepath.Join(s.dir, lockFileName)
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600) })
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("open checkpoint lock: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	if _, err := ignoringEINTR(func() (int, error) { return 0, unix.Flock(fd, unix.LOCK_EX) }); err != nil {
		_ = unix.Close(fd)
		s.mu.Unlock()
		return nil, fmt.Errorf("lock checkpoint: %w", err)
	}
	return func() {
		// Closing the descriptor releases the flock.
		_ = unix.Close(fd)
		s.mu.Unlock()
	}, nil
}

// readFile reads the file at path whole, like os.ReadFile but with plain open(2) and
// read(2) calls (see Lock) and no fstat: sizeHint, the length of the last content seen,
// sizes the buffer. A missing file is an error wrapping fs.ErrNotExist.
func readFile(path string, sizeHint int) ([]byte, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }()
	data := make([]byte, 0, sizeHint+512)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := ignoringEINTR(func() (int, error) { return unix.Read(fd, data[len(data):cap(data)]) })
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return data, nil
		}
		data = data[:len(data)+n]
	}
}

func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// Loaded is the result of [Store.Load].
type Loaded struct {
	// Checkpoint is the state to work with; never nil.
	Checkpoint *Checkpoint
	// Stale holds the entries of an earlier boot, already dropped from Checkpoint; the
	// caller removes whatever they left behind.
	Stale []*Claim
	// QuarantinedTo is set when the file was corrupted: it was renamed to this path and
	// Checkpoint starts empty.
	QuarantinedTo string
	// Corruption is the reason for the quarantine.
	Corruption error
}

// Load reads the checkpoint, after removing the temporary files of interrupted saves. A
// missing file is an empty checkpoint. A file of a newer version is an error wrapping
// [ErrFutureVersion], and the checkpoint is left as it is. A corrupted file is moved aside (see [Loaded.QuarantinedTo]) and the plugin starts over
// empty; why that is the safer choice is explained in docs/kubelet-plugin.md.
//
// Load must be called with the lock held.
func (s *Store) Load() (Loaded, error) {
	s.removeTempFiles()
	data, err := readFile(s.Path(), 0)
	return s.load(data, err)
}

// load is Load on the file's content data, or readErr, the error of reading it.
func (s *Store) load(data []byte, readErr error) (Loaded, error) {
	bootID, err := s.BootID()
	if err != nil {
		return Loaded{}, err
	}
	if errors.Is(readErr, fs.ErrNotExist) {
		return Loaded{Checkpoint: New(bootID)}, nil
	}
	if readErr != nil {
		return Loaded{}, fmt.Errorf("read checkpoint %s: %w", s.Path(), readErr)
	}
	cp, err := Decode(data)
	switch {
	case errors.Is(err, ErrFutureVersion):
		return Loaded{}, fmt.Errorf("load %s: %w", s.Path(), err)
	case errors.Is(err, ErrCorrupt):
		aside := fmt.Sprintf("%s.corrupt-%s", s.Path(), s.now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(s.Path(), aside); rerr != nil {
			return Loaded{}, fmt.Errorf("move corrupted checkpoint %s aside: %w (it is corrupted: %w)", s.Path(), rerr, err)
		}
		return Loaded{Checkpoint: New(bootID), QuarantinedTo: aside, Corruption: err}, nil
	case err != nil:
		return Loaded{}, fmt.Errorf("load %s: %w", s.Path(), err)
	}
	if cp.BootID == bootID {
		return Loaded{Checkpoint: cp}, nil
	}
	out := Loaded{Checkpoint: New(bootID)}
	for _, uid := range SortedUIDs(cp) {
		out.Stale = append(out.Stale, cp.Claims[uid])
	}
	return out, nil
}

// Save writes cp atomically against a crash of the process ([atomicfile.WriteFile]), so
// that a reader (this process after a restart, or another instance) sees the old or the
// new content, never a mix.
//
// Neither the file nor the directory is fsynced, on purpose: data in the page cache
// survives any crash of the process, and is lost only with the kernel (a kernel crash or
// a power loss), which always means a reboot. After a reboot the checkpoint is void
// anyway (its boot ID differs, see Load), and a file that the lost page cache left empty
// or torn fails to decode and is moved aside like any corrupted file, which after a
// reboot loses nothing. An fsync would therefore buy nothing but ~10-20 ms per save on a
// node's disk. docs/kubelet-plugin.md has the whole argument.
//
// Save must be called with the lock held.
func (s *Store) Save(cp *Checkpoint) error {
	_, err := s.save(cp)
	return err
}

// save is Save returning the bytes written.
func (s *Store) save(cp *Checkpoint) ([]byte, error) {
	cp.Version = Version
	data, err := Encode(cp)
	if err != nil {
		return nil, err
	}
	// Every reader and writer of the file holds the lock (Lock), so the file it replaces
	// can be the one the next save writes into: no file is created or removed per save.
	if err := atomicfile.WriteFile(s.Path(), data, 0o600, atomicfile.Spare(filepath.Join(s.dir, spareFileName))); err != nil {
		return nil, fmt.Errorf("write checkpoint: %w", err)
	}
	return data, nil
}

// removeTempFiles removes the temporary files of saves that a crash interrupted. With the
// lock held no save is under way, in this process or another, so every one is a leftover.
// It is best effort: a leftover is a hidden file that nothing reads, and failing a load
// over it would fail every prepare.
func (s *Store) removeTempFiles() {
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if n := e.Name(); atomicfile.IsTemp(FileName, n) && e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(s.dir, n))
		}
	}
}

// SortedUIDs returns the claim UIDs of cp in a stable order.
func SortedUIDs(cp *Checkpoint) []string {
	uids := make([]string, 0, len(cp.Claims))
	for uid := range cp.Claims {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return uids
}
