// Package paytest holds an in-memory pay.OrderStore for tests of the pay
// flow and the HTTP layer. Database behaviour itself is tested on real
// MariaDB and SQLite in internal/repo.
package paytest

import (
	"context"
	"sync"
	"time"

	"payserver/internal/pay"
)

// MemStore is an in-memory pay.OrderStore whose calls can be made to fail.
// The zero value is not usable; call NewMemStore.
type MemStore struct {
	mu     sync.Mutex
	orders map[string]pay.Order
	// GetFault, when set, runs before every Get: a non-nil error fails the
	// call (it may also panic, to test recovery).
	GetFault func(requestID string) error
	// FailCreate and FailFinish, when set, are returned by those calls.
	FailCreate, FailFinish error
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{orders: map[string]pay.Order{}} }

var _ pay.OrderStore = (*MemStore)(nil)

// SetFailures sets FailCreate and FailFinish under the store's lock.
func (s *MemStore) SetFailures(create, finish error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.FailCreate, s.FailFinish = create, finish
}

// Get implements pay.OrderStore.
func (s *MemStore) Get(_ context.Context, id string) (*pay.Order, error) {
	if s.GetFault != nil {
		if err := s.GetFault(id); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return nil, pay.ErrOrderNotFound
	}
	return &o, nil
}

// Create implements pay.OrderStore.
func (s *MemStore) Create(_ context.Context, o *pay.Order) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.FailCreate != nil {
		return s.FailCreate
	}
	if _, dup := s.orders[o.RequestID]; dup {
		return pay.ErrDuplicateOrder
	}
	s.orders[o.RequestID] = *o
	return nil
}

// Finish implements pay.OrderStore.
func (s *MemStore) Finish(_ context.Context, o *pay.Order) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.FailFinish != nil {
		return s.FailFinish
	}
	if err := pay.CheckFinish(o); err != nil {
		return err
	}
	// As the SQL stores: only the claimant's order, still PROCESSING or
	// UNKNOWN, takes an outcome.
	if cur, ok := s.orders[o.RequestID]; !ok || cur.OrderNo != o.OrderNo || pay.CheckFinishFrom(&cur) != nil {
		return pay.ErrOrderNotFound
	}
	s.orders[o.RequestID] = *o
	return nil
}

// Reroute implements pay.OrderStore.
func (s *MemStore) Reroute(_ context.Context, o *pay.Order, from string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.FailFinish != nil {
		return s.FailFinish
	}
	cur, ok := s.orders[o.RequestID]
	if !ok || cur.OrderNo != o.OrderNo || cur.Channel != from || cur.Status != pay.StatusProcessing {
		return pay.ErrOrderNotFound
	}
	cur.Channel, cur.RoutedFrom, cur.UpdatedAt = o.Channel, append([]pay.RouteSkip(nil), o.RoutedFrom...), o.UpdatedAt
	s.orders[o.RequestID] = cur
	return nil
}

// MarkStaleUnknown implements pay.OrderStore; the memory store never sweeps.
func (s *MemStore) MarkStaleUnknown(context.Context, time.Time) (int64, error) { return 0, nil }

// Ping implements pay.OrderStore.
func (s *MemStore) Ping(context.Context) error { return nil }
