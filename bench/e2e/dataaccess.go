package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// accessRow is the orders table as gorm's builder sees it (the columns of
// migrations/mysql/00001_orders.sql).
type accessRow struct {
	ID             uint64 `gorm:"primaryKey"`
	OrderNo        string
	RequestID      string
	RequestHash    string
	BizType        string
	Channel        string
	MerchantID     string
	Amount         int64
	Currency       string
	Subject        string
	Status         string
	ChannelTradeNo string
	FailureCode    string
	FailureMessage string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (accessRow) TableName() string { return "orders" }

// The order store's own statements (internal/repo/orders.go).
const (
	accessColumns = "order_no, request_id, request_hash, biz_type, channel, merchant_id, amount, currency, subject, " +
		"status, channel_trade_no, failure_code, failure_message, created_at, updated_at"
	accessGetSQL    = "SELECT " + accessColumns + " FROM orders WHERE request_id = ?"
	accessCreateSQL = "INSERT INTO orders (" + accessColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	accessFinishSQL = "UPDATE orders SET status = ?, channel_trade_no = ?, failure_code = ?, failure_message = ?, updated_at = ? " +
		"WHERE request_id = ? AND order_no = ? AND status IN (?, ?)"
)

// accessStyle is one way of running a payment's three statements.
type accessStyle struct {
	name string
	pay  func(ctx context.Context, r *accessRow) error
	// after the run: statements, payments, elapsed, CPU of this process and of mariadbd, mallocs
	payments  int64
	errs      int64
	elapsed   time.Duration
	selfCPU   time.Duration
	dbCPU     time.Duration
	mallocs   uint64
	latencies []time.Duration
}

// dataAccess measures the order store's hot path (a payment: SELECT by
// request_id finding nothing, the claim INSERT, the outcome UPDATE), one
// statement at a time (the store's unbatched path), in two data-access
// styles side by side on one MariaDB:
//
//   - gorm-builder: gorm with PrepareStmt and SkipDefaultTransaction, its
//     builder API (Take, Create, Model.Where.Updates);
//   - gorm-pool-raw: the same fixed SQL the store sends today, through gorm's
//     prepared-statement pool (db.ConnPool);
//   - sql-interpolate: the same SQL on database/sql with the driver's
//     interpolateParams (no server-side prepare: one round trip, text
//     protocol), for reference.
//
// Sides are interleaved in rounds. It prints payments/s, p50/p99, CPU
// microseconds per payment of this process and of mariadbd (from
// /proc/PID/stat, -mariadbd-pid), allocations per payment, and RATIO lines.
func dataAccess(args []string) error {
	fs := flag.NewFlagSet("dataaccess", flag.ExitOnError)
	defDSN := ""
	if a := os.Getenv("PAYSERVER_TEST_MYSQL_DURABLE_ADDR"); a != "" {
		defDSN = "payserver:payserver@tcp(" + a + ")/payserver?parseTime=true&loc=UTC"
	}
	dsn := fs.String("dsn", defDSN, "MySQL DSN of a scratch database (its orders table is dropped and created); default the durable MariaDB of the testenv command ($PAYSERVER_TEST_MYSQL_DURABLE_ADDR)")
	schema := fs.String("schema", "migrations/mysql/00001_orders.sql", "the orders migration (its Up part creates the table)")
	conns := fs.Int("conns", 64, "concurrent payments (and pool size)")
	duration := fs.Duration("duration", 4*time.Second, "length of one side's run in a round")
	rounds := fs.Int("rounds", 3, "rounds; each runs every side once")
	defPID, _ := strconv.Atoi(os.Getenv("PAYSERVER_TEST_MYSQL_DURABLE_PID"))
	dbPID := fs.Int("mariadbd-pid", defPID, "pid of mariadbd, for its CPU per payment (0: not measured); default $PAYSERVER_TEST_MYSQL_DURABLE_PID")
	header := fs.Bool("header", true, "print the conditions (commit, machine, load, what else runs) first and last")
	_ = fs.Parse(args)
	if *dsn == "" {
		return fmt.Errorf("no MariaDB: -dsn, or PAYSERVER_TEST_MYSQL_DURABLE_ADDR (go run ./internal/testenv/cmd/testenv -services mariadb-durable -- ...)")
	}

	ctx := context.Background()
	cfg, err := mysqldriver.ParseDSN(*dsn)
	if err != nil {
		return err
	}
	cfg.ClientFoundRows = true
	up, err := os.ReadFile(*schema)
	if err != nil {
		return err
	}
	create := strings.TrimSpace(strings.SplitN(strings.SplitN(string(up), "-- +goose Down", 2)[0], "-- +goose Up", 2)[1])
	plain, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer plain.Close()
	if _, err := plain.ExecContext(ctx, "DROP TABLE IF EXISTS orders"); err != nil {
		return err
	}
	if _, err := plain.ExecContext(ctx, create); err != nil {
		return err
	}
	openGorm := func() (*gorm.DB, error) {
		db, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{
			SkipDefaultTransaction: true, PrepareStmt: true, TranslateError: true,
			Logger: logger.Discard,
		})
		if err != nil {
			return nil, err
		}
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		sqlDB.SetMaxOpenConns(*conns)
		sqlDB.SetMaxIdleConns(*conns)
		return db, nil
	}
	builder, err := openGorm()
	if err != nil {
		return err
	}
	pool, err := openGorm()
	if err != nil {
		return err
	}
	icfg := cfg.Clone()
	icfg.InterpolateParams = true
	interp, err := sql.Open("mysql", icfg.FormatDSN())
	if err != nil {
		return err
	}
	defer interp.Close()
	interp.SetMaxOpenConns(*conns)
	interp.SetMaxIdleConns(*conns)

	rawPay := func(ctx context.Context, c interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}, r *accessRow) error {
		rows, err := c.QueryContext(ctx, accessGetSQL, r.RequestID)
		if err != nil {
			return err
		}
		found := rows.Next()
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if found {
			return fmt.Errorf("request %s already exists", r.RequestID)
		}
		if _, err := c.ExecContext(ctx, accessCreateSQL, r.OrderNo, r.RequestID, r.RequestHash, r.BizType, r.Channel,
			r.MerchantID, r.Amount, r.Currency, r.Subject, r.Status, r.ChannelTradeNo, r.FailureCode, r.FailureMessage,
			r.CreatedAt, r.UpdatedAt); err != nil {
			return err
		}
		res, err := c.ExecContext(ctx, accessFinishSQL, "SUCCEEDED", "SIM-"+r.RequestID, "", "", time.Now().UTC(),
			r.RequestID, r.OrderNo, "PROCESSING", "UNKNOWN")
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("outcome of %s: %d rows", r.RequestID, n)
		}
		return nil
	}
	styles := []*accessStyle{
		{name: "gorm-builder", pay: func(ctx context.Context, r *accessRow) error {
			var got accessRow
			err := builder.WithContext(ctx).Where("request_id = ?", r.RequestID).Take(&got).Error
			if !errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("lookup of %s: %v", r.RequestID, err)
			}
			if err := builder.WithContext(ctx).Create(r).Error; err != nil {
				return err
			}
			res := builder.WithContext(ctx).Model(&accessRow{}).
				Where("request_id = ? AND order_no = ? AND status IN ?", r.RequestID, r.OrderNo, []string{"PROCESSING", "UNKNOWN"}).
				Updates(map[string]any{"status": "SUCCEEDED", "channel_trade_no": "SIM-" + r.RequestID,
					"failure_code": "", "failure_message": "", "updated_at": time.Now().UTC()})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return fmt.Errorf("outcome of %s: %d rows", r.RequestID, res.RowsAffected)
			}
			return nil
		}},
		{name: "gorm-pool-raw", pay: func(ctx context.Context, r *accessRow) error { return rawPay(ctx, pool.ConnPool, r) }},
		{name: "sql-interpolate", pay: func(ctx context.Context, r *accessRow) error { return rawPay(ctx, interp, r) }},
	}

	defer conditions(*header, "order store data access (bench/e2e dataaccess)")()
	fmt.Printf("== order store data access: a payment = SELECT (no row) + INSERT + UPDATE, one statement at a time, %d concurrent, %d rounds of %s per side\n",
		*conns, *rounds, *duration)
	var seq atomic.Int64
	for round := 0; round < *rounds; round++ {
		for _, st := range styles {
			if err := st.run(ctx, *conns, *duration, *dbPID, &seq); err != nil {
				return fmt.Errorf("%s: %w", st.name, err)
			}
		}
	}
	fmt.Printf("  %-16s %10s %8s %8s %12s %12s %12s\n", "style", "payments/s", "p50 ms", "p99 ms", "self µs/pay", "mariadbd µs", "allocs/pay")
	for _, st := range styles {
		sort.Slice(st.latencies, func(i, j int) bool { return st.latencies[i] < st.latencies[j] })
		fmt.Printf("  %-16s %10.0f %8.2f %8.2f %12.1f %12.1f %12.0f   (%d payments, %d errors)\n", st.name, st.rate(),
			ms(q(st.latencies, 0.50)), ms(q(st.latencies, 0.99)), st.perPay(st.selfCPU), st.perPay(st.dbCPU),
			float64(st.mallocs)/float64(max(st.payments, 1)), st.payments, st.errs)
	}
	b, p, i := styles[0], styles[1], styles[2]
	fmt.Printf("RATIO gorm-pool-raw/gorm-builder payments/s = %.2f (reported)\n", p.rate()/b.rate())
	fmt.Printf("RATIO gorm-builder/gorm-pool-raw self CPU per payment = %.2f (reported)\n", b.perPay(b.selfCPU)/p.perPay(p.selfCPU))
	fmt.Printf("RATIO gorm-builder/gorm-pool-raw allocations per payment = %.2f (reported)\n",
		float64(b.mallocs)/float64(b.payments)/(float64(p.mallocs)/float64(p.payments)))
	fmt.Printf("RATIO sql-interpolate/gorm-pool-raw payments/s = %.2f (reported)\n", i.rate()/p.rate())
	if *dbPID > 0 {
		fmt.Printf("RATIO gorm-builder/gorm-pool-raw mariadbd CPU per payment = %.2f (reported)\n", b.perPay(b.dbCPU)/p.perPay(p.dbCPU))
		fmt.Printf("RATIO sql-interpolate/gorm-pool-raw mariadbd CPU per payment = %.2f (reported)\n", i.perPay(i.dbCPU)/p.perPay(p.dbCPU))
	}
	for _, st := range styles {
		if st.errs > 0 {
			return fmt.Errorf("%s: %d payments failed", st.name, st.errs)
		}
	}
	return nil
}

// run drives conns concurrent payments through st for d and adds to its totals.
func (st *accessStyle) run(ctx context.Context, conns int, d time.Duration, dbPID int, seq *atomic.Int64) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	self0, db0 := selfCPU(), procCPU(dbPID)
	begin := time.Now()
	deadline := begin.Add(d)
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var n, errs int64
			for time.Now().Before(deadline) {
				id := strconv.FormatInt(seq.Add(1), 36)
				now := time.Now().UTC()
				r := &accessRow{OrderNo: "PSA" + id + strconv.FormatInt(begin.UnixNano(), 36), RequestID: "acc-" + id + "-" + strconv.FormatInt(begin.UnixNano(), 36),
					RequestHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", BizType: "BENCH",
					Channel: "ALIPAY", MerchantID: "M1", Amount: 1999, Currency: "CNY", Status: "PROCESSING",
					CreatedAt: now, UpdatedAt: now}
				t := time.Now()
				if err := st.pay(ctx, r); err != nil {
					errs++
					if errs == 1 {
						fmt.Fprintln(os.Stderr, "dataaccess:", st.name, err)
					}
					continue
				}
				lat = append(lat, time.Since(t))
				n++
			}
			mu.Lock()
			st.payments += n
			st.errs += errs
			st.latencies = append(st.latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	st.elapsed += time.Since(begin)
	runtime.ReadMemStats(&m1)
	st.selfCPU += selfCPU() - self0
	st.dbCPU += procCPU(dbPID) - db0
	st.mallocs += m1.Mallocs - m0.Mallocs
	return nil
}

func (st *accessStyle) rate() float64 { return float64(st.payments) / st.elapsed.Seconds() }

// perPay is d per payment in microseconds.
func (st *accessStyle) perPay(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(max(st.payments, 1))
}

// selfCPU is the user+system CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system CPU time of process pid so far (0 for pid 0),
// from /proc/PID/stat in clock ticks of 10 ms (CLK_TCK 100 on Linux).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}
