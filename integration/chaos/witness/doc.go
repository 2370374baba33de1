// Package witness is the independent checker of the chaos campaign's
// histories. It imports no package of payserver: it reads the limits
// documents with its own parser and works out calendar periods from the
// zone's wall clock by its own means.
package witness
