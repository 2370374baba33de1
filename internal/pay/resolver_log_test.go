package pay_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/testutil"
)

// schemaBehindStore is an order store whose orders table is missing: every
// read fails.
type schemaBehindStore struct{ pay.ResolveStore }

var errNoTable = errors.New("no such table: orders")

func (schemaBehindStore) Unresolved(context.Context, time.Time, int) ([]pay.Unresolved, error) {
	return nil, errNoTable
}

func (schemaBehindStore) UnresolvedStats(context.Context) (int64, time.Time, error) {
	return 0, time.Time{}, errNoTable
}

// TestResolverReadFailureLogIsRateLimited: a store that fails every read
// (a schema behind, a database down) is logged once, not once a round.
func TestResolverReadFailureLogIsRateLimited(t *testing.T) {
	sim, err := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := channel.NewRegistry(sim)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	res, err := pay.NewResolver(schemaBehindStore{}, localLimiter(t, resolverLimits), reg, pay.ResolverOptions{
		Owner: "a", Interval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res.Run(ctx)
	if n := strings.Count(logs.String(), "could not read the orders to resolve"); n != 1 {
		t.Errorf("the read failure was logged %d times in 200 rounds, want once:\n%s", n, logs.String())
	}
}
