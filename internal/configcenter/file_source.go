package configcenter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// FileSource delivers the limits document from a local file and every change
// to it. It watches the file's directory (so editors that replace the file
// are seen) and re-reads it every PollInterval as a safety net.
type FileSource struct {
	path string
	opts FileOptions
}

// FileOptions tunes a FileSource.
type FileOptions struct {
	// PollInterval re-reads the file even without a change event. Default 2s.
	PollInterval time.Duration
	// Debounce waits for a burst of events to settle. Default 50ms.
	Debounce time.Duration
	Logger   *slog.Logger
}

// NewFileSource returns a source for the file at path.
func NewFileSource(path string, opts FileOptions) (*FileSource, error) {
	if path == "" {
		return nil, errors.New("configcenter: empty limits file path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 2 * time.Second
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 50 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &FileSource{path: abs, opts: opts}, nil
}

// Describe implements Source.
func (s *FileSource) Describe() string { return "file " + s.path }

// Run implements Source.
func (s *FileSource) Run(ctx context.Context, sink func(Document)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("configcenter: watch %s: %w", s.path, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("configcenter: watch %s: %w", filepath.Dir(s.path), err)
	}
	var gate versionGate
	deliver := func() {
		if d := s.read(); gate.fresh(d) {
			sink(d)
		}
	}
	deliver()
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Clean(ev.Name) == s.path {
				settle = time.After(s.opts.Debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.opts.Logger.Warn("limits file watch error; polling continues", "path", s.path, "err", err)
		case <-settle:
			settle = nil
			deliver()
		case <-poll.C:
			deliver()
		}
	}
}

func (s *FileSource) read() Document {
	data, err := os.ReadFile(s.path)
	d := Document{Source: "file", Name: s.path, Content: data}
	if err != nil {
		d.Content = nil
		d.Deleted = errors.Is(err, fs.ErrNotExist)
		if !d.Deleted {
			// Unreadable: deliver as empty so the manager refuses and logs it.
			s.opts.Logger.Warn("limits file unreadable", "path", s.path, "err", err)
			d.MD5 = ContentMD5(nil)
		}
		return d
	}
	d.MD5 = ContentMD5(data)
	return d
}
