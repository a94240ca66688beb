package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
)

// Group commit.
//
// Concurrent prepare and unprepare calls each change the checkpoint two or three times.
// Writing the file once per change would make them queue behind each other's writes; a
// group commit writes once for everything that arrived meanwhile. [Store.Update] queues a
// change; one caller at a time is the committer. The committer takes the store's lock
// (the mutex and the flock, so a second plugin instance of a rolling update is excluded
// as before), loads the file, applies every queued change in order, saves once, releases
// the lock and then wakes the callers of that batch. A caller returns only after the save
// that contains its change, so "Update returned" still means "on disk under the real
// name", which is what the two-phase recovery relies on.
//
// While one batch is being written the next one collects; when a committer is done, the
// first waiter of the next batch takes over, so no caller commits on behalf of others
// for longer than one batch.
//
// Invariants:
//   - A change function runs with the store's lock held and must be quick: no I/O, no
//     waiting on other locks (callers may hold locks of their own claims, never the store's).
//   - A change function that returns an error must not have changed the checkpoint.
//   - A batch is durable as a whole or fails as a whole: if its save fails, every caller
//     of the batch gets the save's error, including callers whose function changed
//     nothing (their answer may rest on a change of the batch that was not saved).
//   - The checkpoint a change function gets belongs to the store: it must not keep
//     pointers into it (or put in pointers it keeps) beyond the call.

// ErrSave wraps the error of a batch whose save failed.
var ErrSave = errors.New("save checkpoint")

// Change is a change of the checkpoint inside [Store.Update]. It reports whether it
// changed cp; an error means it did not.
type Change func(cp *Checkpoint) (changed bool, err error)

// Hooks are called by the committer with the store's lock held.
type Hooks struct {
	// Recover is called when a load found something to recover (a quarantined file,
	// entries of an earlier boot), before the batch's changes; its error fails the batch.
	// The checkpoint is saved afterwards even if nothing else changed.
	Recover func(Loaded) error
	// Committed is called after each batch with the checkpoint as saved (or as loaded
	// when nothing changed); for gauges.
	Committed func(cp *Checkpoint)
}

// SetHooks sets the committer's hooks; call it before the first Update.
func (s *Store) SetHooks(h Hooks) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = h
}

// pendingChange is one queued Update.
type pendingChange struct {
	fn  Change
	err error
	// lead is set (before done is signalled) when this caller is to commit the next
	// batch rather than having been committed.
	lead bool
	done chan struct{}
}

// Update applies fn to the checkpoint and returns once a save that includes the change
// is done (or fn's error, or the batch's error). See the package's group commit notes
// for the invariants fn must keep.
func (s *Store) Update(fn Change) error {
	p := &pendingChange{fn: fn, done: make(chan struct{}, 1)}
	s.queueMu.Lock()
	s.queue = append(s.queue, p)
	lead := !s.committing
	s.committing = true
	s.queueMu.Unlock()
	if !lead {
		<-p.done
		if !p.lead {
			return p.err
		}
	}
	// This caller commits everything queued so far, which includes its own change.
	s.queueMu.Lock()
	batch := s.queue
	s.queue = nil
	s.queueMu.Unlock()
	s.commit(batch)
	s.queueMu.Lock()
	if len(s.queue) > 0 {
		next := s.queue[0]
		next.lead = true
		next.done <- struct{}{}
	} else {
		s.committing = false
	}
	s.queueMu.Unlock()
	return p.err
}

// commit applies and saves one batch and wakes its callers, except the committer's own
// (which reads its result after commit returns).
func (s *Store) commit(batch []*pendingChange) {
	err := s.commitLocked(batch)
	for _, p := range batch {
		if err != nil {
			p.err = err
		}
		if !p.lead {
			p.done <- struct{}{}
		}
	}
}

// commitLocked takes the lock, applies the batch and saves it. It returns the error
// that fails the whole batch; errors of single changes are left in their entries.
func (s *Store) commitLocked(batch []*pendingChange) error {
	unlock, err := s.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	loaded, err := s.loadCached()
	if err != nil {
		return err
	}
	cp := loaded.Checkpoint
	changed := false
	if loaded.QuarantinedTo != "" || len(loaded.Stale) > 0 {
		if s.hooks.Recover != nil {
			if err := s.hooks.Recover(loaded); err != nil {
				return err
			}
		}
		changed = true
	}
	for _, p := range batch {
		c, err := p.fn(cp)
		p.err = err
		changed = changed || (err == nil && c)
	}
	if changed {
		data, err := s.save(cp)
		if err != nil {
			// The changes of the batch are in cp but not on disk: forget cp.
			s.cached, s.cachedData = nil, nil
			return fmt.Errorf("%w: %w", ErrSave, err)
		}
		s.cached, s.cachedData = cp, data
	}
	if s.hooks.Committed != nil {
		s.hooks.Committed(cp)
	}
	return nil
}

// loadCached is Load, except that it decodes the file only when its bytes differ from
// what this store last wrote or read: reading a small file is cheap, decoding it for
// every batch is not. The bytes are compared rather than, say, the inode and the mtime,
// so that another instance's write is always seen. Must be called with the lock held.
func (s *Store) loadCached() (Loaded, error) {
	data, readErr := readFile(s.Path(), len(s.cachedData))
	if readErr == nil && s.cached != nil && bytes.Equal(data, s.cachedData) {
		return Loaded{Checkpoint: s.cached}, nil
	}
	s.cached, s.cachedData = nil, nil
	// What Load does, on the content just read.
	s.removeTempFiles()
	loaded, err := s.load(data, readErr)
	if err != nil {
		return Loaded{}, err
	}
	if loaded.QuarantinedTo == "" && len(loaded.Stale) == 0 && data != nil {
		// Unchanged on disk until the next save, which refreshes the cache itself.
		s.cached, s.cachedData = loaded.Checkpoint, data
	}
	return loaded, nil
}
