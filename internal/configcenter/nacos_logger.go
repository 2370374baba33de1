package configcenter

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	nacoslogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
)

// The nacos-sdk-go logger is a process-wide global inside the SDK
// (logger.SetLogger). It is the one global of this package: the first
// NacosSource that creates its SDK client installs an adapter that routes
// every SDK log line into that source's *slog.Logger at that source's
// level. Later sources reuse the same adapter (their passwords are added to
// its redaction list), because the SDK cannot hold more than one logger.
// Installing the adapter also stops the SDK from creating its own zap log
// file under ClientConfig.LogDir.
var sdkLogHook struct {
	once    sync.Once
	adapter *slogNacosLogger
}

// installNacosSDKLogger installs the slog adapter as the SDK logger once per
// process and registers secret so that it is redacted from SDK log lines.
func installNacosSDKLogger(l *slog.Logger, min slog.Level, secret string) {
	sdkLogHook.once.Do(func() {
		sdkLogHook.adapter = newSlogNacosLogger(l.With(slog.String("sdk", "nacos-sdk-go")), min)
		nacoslogger.SetLogger(sdkLogHook.adapter)
	})
	sdkLogHook.adapter.addSecret(secret)
}

// firstLine returns the first line of err's message: SDK errors built with
// pkg/errors may carry a stack trace when formatted with %+v.
func firstLine(err error) string {
	if err == nil {
		return ""
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}

// nacosSDKLogLevel maps a slog level to the level names the SDK accepts.
func nacosSDKLogLevel(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	default:
		return "error"
	}
}

// slogNacosLogger implements the nacos-sdk-go logger.Logger interface on top
// of log/slog. It is safe for concurrent use.
type slogNacosLogger struct {
	l   *slog.Logger
	min slog.Level
	// credential matches "name": "value" / name=value pairs of
	// credentials the SDK may print: the request bodies it logs on
	// failures carry the access token in their headers, and the login
	// form carries the password. It also matches the protobuf text form
	// key:"accessToken" value:"…" of the gRPC request headers the SDK logs
	// at debug level.
	credential *regexp.Regexp

	mu      sync.RWMutex
	secrets []string
}

func newSlogNacosLogger(l *slog.Logger, min slog.Level) *slogNacosLogger {
	return &slogNacosLogger{
		l:          l,
		min:        min,
		credential: regexp.MustCompile(`(?i)((?:key:\s*"(?:accessToken|password|secretKey|accessKey)"\s+value:\s*")|(?:"?(?:accessToken|password|secretKey|accessKey)"?\s*[:=]\s*"?))[^",&\s}]*`),
	}
}

var _ nacoslogger.Logger = (*slogNacosLogger)(nil)

func (a *slogNacosLogger) addSecret(s string) {
	if s == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, have := range a.secrets {
		if have == s {
			return
		}
	}
	a.secrets = append(a.secrets, s)
}

func (a *slogNacosLogger) redact(msg string) string {
	msg = a.credential.ReplaceAllString(msg, "${1}REDACTED")
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, s := range a.secrets {
		msg = strings.ReplaceAll(msg, s, "REDACTED")
	}
	return msg
}

func (a *slogNacosLogger) log(level slog.Level, msg string) {
	if level < a.min {
		return
	}
	ctx := context.Background()
	if !a.l.Enabled(ctx, level) {
		return
	}
	// Skip runtime.Callers, log, and the exported method so that the record
	// points at the SDK call site.
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:])
	// The SDK formats pkg/errors values with %+v, which appends a stack
	// trace; keep the first line as the message and the rest as a debug
	// detail.
	msg = a.redact(strings.TrimSpace(msg))
	first, rest, multi := strings.Cut(msg, "\n")
	r := slog.NewRecord(time.Now(), level, first, pcs[0])
	if multi && a.l.Enabled(ctx, slog.LevelDebug) {
		r.AddAttrs(slog.String("detail", rest))
	}
	_ = a.l.Handler().Handle(ctx, r)
}

// Debug logs at slog.LevelDebug.
func (a *slogNacosLogger) Debug(args ...any) { a.log(slog.LevelDebug, fmt.Sprint(args...)) }

// Info logs at slog.LevelInfo.
func (a *slogNacosLogger) Info(args ...any) { a.log(slog.LevelInfo, fmt.Sprint(args...)) }

// Warn logs at slog.LevelWarn.
func (a *slogNacosLogger) Warn(args ...any) { a.log(slog.LevelWarn, fmt.Sprint(args...)) }

// Error logs at slog.LevelError.
func (a *slogNacosLogger) Error(args ...any) { a.log(slog.LevelError, fmt.Sprint(args...)) }

// Debugf logs at slog.LevelDebug.
func (a *slogNacosLogger) Debugf(format string, args ...any) {
	a.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}

// Infof logs at slog.LevelInfo.
func (a *slogNacosLogger) Infof(format string, args ...any) {
	a.log(slog.LevelInfo, fmt.Sprintf(format, args...))
}

// Warnf logs at slog.LevelWarn.
func (a *slogNacosLogger) Warnf(format string, args ...any) {
	a.log(slog.LevelWarn, fmt.Sprintf(format, args...))
}

// Errorf logs at slog.LevelError.
func (a *slogNacosLogger) Errorf(format string, args ...any) {
	a.log(slog.LevelError, fmt.Sprintf(format, args...))
}

// Close does nothing: the slog handler belongs to the service. The SDK
// calls Close on the previous logger when a new one is set.
func (a *slogNacosLogger) Close() error { return nil }
