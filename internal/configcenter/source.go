// Package configcenter loads the channel limits document from a source (a
// watched local file, or Nacos), validates it, and hands each good version to
// the limiter. A bad version is refused and the last good one stays.
package configcenter

import "context"

// Document is one version of the limits document as a Source delivered it.
type Document struct {
	// Content is the raw YAML or JSON text.
	Content []byte
	// Source names the kind of source: "file" or "nacos".
	Source string
	// Name locates the document inside its source: a file path, or
	// "GROUP/dataId" for Nacos.
	Name string
	// MD5 is the hex MD5 of Content (as Nacos reports it, or computed).
	MD5 string
	// Deleted is true when the source reports that the document is gone.
	// A deleted document is refused like an invalid one: the last good
	// limits stay in force.
	Deleted bool
}

// Source delivers versions of the limits document.
//
// Run delivers the current document (if the source has one) and then every
// change, calling sink serially from one goroutine, never concurrently and in
// the order the source observed the versions. Run returns when ctx is done,
// or early with an error when the source cannot start at all. A source that
// is unreachable at start but has a local snapshot delivers the snapshot and
// keeps reconnecting in the background.
type Source interface {
	Run(ctx context.Context, sink func(Document)) error
	// Describe returns a short description for logs and GET /limits,
	// without secrets, such as "nacos PAY_GROUP/payserver-channel-limits".
	Describe() string
}
