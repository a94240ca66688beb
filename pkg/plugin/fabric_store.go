package plugin

import (
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// claimStore is the fabric gate's view of the cluster's claims, fed by a reflector: it
// keeps, trimmed, only the claims with gated results on this node and forgets every
// other claim at once, so that the gate's memory follows the claims waiting for this
// node, not the size of the cluster. A change of a kept claim that is not settled is
// handed to changed (the gate's queue).
//
// It is a cache.ReflectorStore, and a cache.TransformingStore so that the reflector's
// streamed initial list (WatchListClient) holds only the claims' identities while it
// fills up.
type claimStore struct {
	trim    func(*resourceapi.ResourceClaim) *resourceapi.ResourceClaim
	changed func(key string)
	// gone is told about a kept claim that is dropped (deleted, deallocated, allocated
	// elsewhere), so that the gate forgets it too.
	gone func(uid types.UID)

	mu     sync.Mutex
	claims map[string]*resourceapi.ResourceClaim
	// synced is closed on the first Replace: the claims are listed.
	synced   chan struct{}
	replaced bool
}

var (
	_ cache.ReflectorStore    = &claimStore{}
	_ cache.TransformingStore = &claimStore{}
)

func newClaimStore(trim func(*resourceapi.ResourceClaim) *resourceapi.ResourceClaim, changed func(string), gone func(types.UID)) *claimStore {
	return &claimStore{trim: trim, changed: changed, gone: gone, claims: map[string]*resourceapi.ResourceClaim{}, synced: make(chan struct{})}
}

// Transformer keeps of a claim in the reflector's temporary store what this store may
// keep, or its identity alone (the temporary store keys by namespace and name).
func (s *claimStore) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) {
		claim, ok := obj.(*resourceapi.ResourceClaim)
		if !ok {
			return obj, nil
		}
		if t := s.trim(claim); t != nil {
			return t, nil
		}
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Namespace: claim.Namespace, ResourceVersion: claim.ResourceVersion}}, nil
	}
}

// Add keeps or forgets the claim.
func (s *claimStore) Add(obj any) error { s.put(obj); return nil }

// Update keeps or forgets the claim.
func (s *claimStore) Update(obj any) error { s.put(obj); return nil }

// Delete forgets the claim.
func (s *claimStore) Delete(obj any) error {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	s.drop(key)
	return nil
}

// drop forgets the claim kept under key, if any.
func (s *claimStore) drop(key string) {
	s.mu.Lock()
	old := s.claims[key]
	delete(s.claims, key)
	s.mu.Unlock()
	if old != nil {
		s.gone(old.UID)
	}
}

// Replace keeps the claims of list that wait for this node, and nothing else.
func (s *claimStore) Replace(list []any, _ string) error {
	kept := map[string]*resourceapi.ResourceClaim{}
	for _, obj := range list {
		if claim, ok := obj.(*resourceapi.ResourceClaim); ok {
			if t := s.trim(claim); t != nil {
				kept[cache.MetaObjectToName(t).String()] = t
			}
		}
	}
	s.mu.Lock()
	old := s.claims
	s.claims = kept
	first := !s.replaced
	s.replaced = true
	s.mu.Unlock()
	for key, claim := range old {
		if _, ok := kept[key]; !ok {
			s.gone(claim.UID)
		}
	}
	for key, claim := range kept {
		if !settled(claim) {
			s.changed(key)
		}
	}
	if first {
		close(s.synced)
	}
	return nil
}

// Resync does nothing: the gate's queue retries on its own.
func (s *claimStore) Resync() error { return nil }

func (s *claimStore) put(obj any) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	key := cache.MetaObjectToName(claim).String()
	t := s.trim(claim)
	if t == nil {
		s.drop(key)
		return
	}
	s.mu.Lock()
	s.claims[key] = t
	s.mu.Unlock()
	if !settled(t) {
		s.changed(key)
	}
}

// get returns the kept claim of key, or nil.
func (s *claimStore) get(key string) *resourceapi.ResourceClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims[key]
}

// len is the number of claims kept.
func (s *claimStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.claims)
}
