// Command channel-emulator is a channel gateway emulator for tests: it
// serves the gateway protocol for several channels on a loopback address,
// misbehaves on demand (POST /admin/channels/{code}) and keeps a durable
// ledger of every call (GET /ledger). See package emulator and README.md.
//
//	channel-emulator [-secret S] [-key CODE=ID:SECRET]... [-addr 127.0.0.1:8090]
//	    [-ledger FILE] [-channels ALIPAY,WECHAT,UNIONPAY] [-notify-url URL]
//	    [-behaviour 'CODE={json}']... [-log-level info]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	addr      string
	secret    string
	ledger    string
	channels  string
	notifyURL string
	logLevel  string
	patches   []emulator.ChannelPatch
	keys      map[string]gateway.Keys
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("channel-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8090", "loopback `host:port` to serve on (port 0 picks one; the log says which)")
	fs.StringVar(&o.secret, "secret", "", "the one key (id default) of every channel without -key of its own: the `secret`, 32 bytes or more")
	fs.Func("key", "a channel's signing key, `CODE=ID:SECRET` (repeatable; a channel's first key signs, any verifies; the secret 32 bytes or more)", func(s string) error {
		code, k, err := parseKey(s)
		if err != nil {
			return err
		}
		if o.keys == nil {
			o.keys = map[string]gateway.Keys{}
		}
		o.keys[code] = append(o.keys[code], k)
		return nil
	})
	fs.StringVar(&o.ledger, "ledger", "channel-emulator.db", "the ledger's SQLite `file` (created, or continued)")
	fs.StringVar(&o.channels, "channels", "ALIPAY,WECHAT,UNIONPAY", "comma-separated channel `codes` to serve")
	fs.StringVar(&o.notifyURL, "notify-url", "", "payserver's base `URL` for asynchronous notifications (empty: none)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Func("behaviour", "a channel's behaviour at start, `CODE={json}` as the admin endpoint takes it (repeatable, applied in order)", func(s string) error {
		p, err := emulator.ParseChannelPatch(s)
		if err != nil {
			return err
		}
		o.patches = append(o.patches, p)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.secret == "" && len(o.keys) == 0 {
		return o, errors.New("-secret or -key is required")
	}
	return o, nil
}

// parseKey reads a -key flag, CODE=ID:SECRET. Its errors never show the
// secret.
func parseKey(s string) (string, gateway.Key, error) {
	code, rest, ok := strings.Cut(s, "=")
	id, secret, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || code == "" || id == "" || secret == "" {
		return "", gateway.Key{}, errors.New("-key: want CODE=ID:SECRET")
	}
	return code, gateway.Key{ID: id, Secret: []byte(secret)}, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "channel-emulator: %v\n", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(stderr, "channel-emulator: -log-level %q: want debug, info, warn or error\n", o.logLevel)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, o, log); err != nil {
		log.Error("channel-emulator failed", "err", err)
		return 1
	}
	return 0
}

// serve opens the ledger, listens and serves until ctx ends, then shuts
// down: held and waiting calls released, the notifier stopped, the server
// drained, the ledger closed.
func serve(ctx context.Context, o options, log *slog.Logger) (err error) {
	ln, err := emulator.ListenLoopback(o.addr)
	if err != nil {
		return err
	}
	defer func() { _ = ln.Close() }() // after Shutdown, already closed
	store, err := emulator.OpenStore(ctx, o.ledger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing the ledger: %w", cerr)
		}
	}()
	em, err := emulator.New(emulator.Config{
		Channels:  channelCodes(o.channels),
		Secret:    []byte(o.secret),
		Keys:      o.keys,
		Store:     store,
		Patches:   o.patches,
		NotifyURL: o.notifyURL,
		Logger:    log,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           em,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "channels", strings.Join(em.Channels(), ","), "ledger", o.ledger, "notifyURL", o.notifyURL)
	select {
	case <-ctx.Done():
	case err := <-served:
		return errors.Join(fmt.Errorf("serve: %w", err), em.Close())
	}
	log.Info("shutting down")
	// Closing the emulator first releases held and waiting calls, so
	// Shutdown need not wait for them.
	if err := em.Close(); err != nil {
		log.Warn("closing the emulator", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if st := em.Notifier(); st != nil {
		s := st.Stats()
		log.Info("notifications", "delivered", s.Delivered, "failed", s.Failed, "dropped", s.Dropped)
	}
	log.Info("stopped")
	return nil
}

// channelCodes splits the -channels list, blanks around the commas
// allowed.
func channelCodes(list string) []string {
	var codes []string
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c != "" {
			codes = append(codes, c)
		}
	}
	return codes
}
