package repo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"payserver/internal/pay"
	"payserver/internal/repo"
	"payserver/internal/testutil"
)

// inState returns a copy of o moved to state s, as its claimant would write
// it.
func inState(o *pay.Order, s pay.State) *pay.Order {
	c := *o
	c.ChannelTradeNo, c.FailureCode, c.FailureMessage = "", "", ""
	switch s {
	case pay.StateProcessing:
		c.Status = pay.StatusProcessing
	case pay.StateSucceeded:
		c.Status, c.ChannelTradeNo = pay.StatusSucceeded, "T1"
	case pay.StateFailed:
		c.Status, c.FailureCode, c.FailureMessage = pay.StatusFailed, "INSUFFICIENT_FUNDS", "declined"
	case pay.StateNotSent:
		c.Status, c.FailureCode, c.FailureMessage = pay.StatusFailed, pay.FailureNotSent, "abandoned"
	case pay.StateUnknown:
		c.Status, c.FailureCode, c.FailureMessage = pay.StatusUnknown, "CHANNEL_TIMEOUT", "no answer"
	}
	c.UpdatedAt = c.UpdatedAt.Add(time.Second)
	return &c
}

// TestOrderStoreTransitions runs every (from, to) pair of the order state
// machine on every database and store variant: the store's writes (Create,
// Finish) succeed exactly for the pairs pay.Allowed allows, only the
// claimant (same OrderNo) moves an order on, and the sweeper moves only
// PROCESSING, to UNKNOWN.
func TestOrderStoreTransitions(t *testing.T) {
	for name, mk := range openCases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			// setUp stores an order of id in state from (none for StateNone).
			setUp := func(t *testing.T, id string, from pay.State) *pay.Order {
				t.Helper()
				o := newOrder(id)
				if from == pay.StateNone {
					return o
				}
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				if from != pay.StateProcessing {
					if err := s.Finish(ctx, inState(o, from)); err != nil {
						t.Fatalf("setting up %s: %v", from, err)
					}
				}
				return o
			}
			stateOf := func(t *testing.T, id string) pay.State {
				t.Helper()
				got, err := s.Get(ctx, id)
				if errors.Is(err, pay.ErrOrderNotFound) {
					return pay.StateNone
				}
				if err != nil {
					t.Fatal(err)
				}
				return pay.StateOf(got)
			}
			for i, from := range pay.States {
				for j, to := range pay.States {
					t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
						if to == pay.StateNone {
							t.Skip("no store operation removes an order")
						}
						id := fmt.Sprintf("tr%d%d", i, j)
						o := setUp(t, id, from)
						var err error
						if to == pay.StateProcessing {
							// Finish never moves an order back to PROCESSING;
							// only a claim (INSERT) makes one.
							if err := s.Finish(ctx, inState(o, to)); err == nil {
								t.Fatalf("Finish moved a %s order to PROCESSING", from)
							}
							claim := newOrder(id) // another claimant's INSERT
							err = s.Create(ctx, claim)
						} else {
							err = s.Finish(ctx, inState(o, to))
						}
						want := pay.Allowed(from, to)
						if got := err == nil; got != want {
							t.Fatalf("write %s -> %s: err %v, want success %v", from, to, err, want)
						}
						wantState := from
						if want {
							wantState = to
						}
						if got := stateOf(t, id); got != wantState {
							t.Fatalf("stored state %s, want %s", got, wantState)
						}
					})
				}
			}
			t.Run("only the claimant finishes", func(t *testing.T) {
				for i, from := range []pay.State{pay.StateProcessing, pay.StateUnknown} {
					id := fmt.Sprintf("own%d", i)
					o := setUp(t, id, from)
					other := inState(o, pay.StateNotSent)
					other.OrderNo = "PS-someone-else"
					if err := s.Finish(ctx, other); !errors.Is(err, pay.ErrOrderNotFound) {
						t.Fatalf("a finish with another OrderNo from %s: %v, want ErrOrderNotFound", from, err)
					}
					if got := stateOf(t, id); got != from {
						t.Fatalf("stored state %s, want %s", got, from)
					}
				}
			})
			t.Run("the sweeper moves only PROCESSING, to UNKNOWN", func(t *testing.T) {
				for i, from := range pay.States[1:] {
					setUp(t, fmt.Sprintf("sw%d", i), from)
				}
				if _, err := s.MarkStaleUnknown(ctx, time.Now().Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
				for i, from := range pay.States[1:] {
					want := from
					if from == pay.StateProcessing {
						want = pay.StateUnknown
					}
					if !pay.Allowed(from, want) && want != from {
						t.Fatalf("the sweeper's %s -> %s is not in the state table", from, want)
					}
					if got := stateOf(t, fmt.Sprintf("sw%d", i)); got != want {
						t.Fatalf("after the sweep %s is %s, want %s", from, got, want)
					}
				}
			})
		})
	}
}

// TestCreateErrorsSayWhetherCommitted: a failed claim wraps
// pay.ErrNotCommitted exactly when the error proves that nothing was
// committed, on real databases.
func TestCreateErrorsSayWhetherCommitted(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		open   func(t *testing.T) (*repo.Orders, context.Context)
		order  func() *pay.Order
		proven bool
	}{
		{"mariadb refuses the row", func(t *testing.T) (*repo.Orders, context.Context) {
			return storeOn(t, repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t)}, true), ctx
		}, func() *pay.Order { o := newOrder("r-long"); o.Currency = "TOOLONG"; return o }, true},
		{"sqlite refuses the row", func(t *testing.T) (*repo.Orders, context.Context) {
			// No migrations: the engine answers "no such table".
			return storeOn(t, repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(t.TempDir(), "p.db")}, false), ctx
		}, func() *pay.Order { return newOrder("r-1") }, true},
		{"mariadb cannot be reached", func(t *testing.T) (*repo.Orders, context.Context) {
			dsn := testutil.MustFreshMySQL(t)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cut := cuttable(t, cfg.Addr)
			cfg.Addr = cut.addr
			s := storeOn(t, repo.OpenOptions{Driver: repo.MySQL, DSN: cfg.FormatDSN()}, true)
			cut.cut() // the pooled connections die and no new one can be made
			return s, ctx
		}, func() *pay.Order { return newOrder("r-1") }, true},
		{"the caller's deadline passes", func(t *testing.T) (*repo.Orders, context.Context) {
			s := storeOn(t, repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t)}, true)
			c, cancel := context.WithCancel(ctx)
			cancel()
			return s, c
		}, func() *pay.Order { return newOrder("r-1") }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, c := tc.open(t)
			err := s.Create(c, tc.order())
			if err == nil {
				t.Fatal("Create succeeded, want an error")
			}
			if got := errors.Is(err, pay.ErrNotCommitted); got != tc.proven {
				t.Fatalf("Create: %v; wraps ErrNotCommitted %v, want %v", err, got, tc.proven)
			}
		})
	}
}

// storeOn opens an order store on opts, migrated when migrate is set.
func storeOn(t *testing.T, opts repo.OpenOptions, migrate bool) *repo.Orders {
	t.Helper()
	db, err := repo.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = repo.Close(db) })
	if migrate {
		if _, err := repo.Migrate(context.Background(), db, opts.Driver); err != nil {
			t.Fatal(err)
		}
	}
	s, err := repo.NewOrders(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cutProxy forwards a loopback port to a server until cut.
type cutProxy struct {
	addr string
	ln   net.Listener
	mu   sync.Mutex
	open []net.Conn
}

// cuttable starts a cutProxy to target, cut when the test ends.
func cuttable(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String(), ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.open = append(p.open, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

// cut closes the listener and every connection: the server looks gone.
func (p *cutProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.open {
		_ = c.Close()
	}
	p.open = nil
}
