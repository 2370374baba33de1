package configcenter

import (
	"crypto/md5"
	"encoding/hex"
)

// ContentMD5 returns the hex MD5 of a limits document's content: its
// version, computed as Nacos computes it, so the file and Nacos sources and
// the history name versions alike.
func ContentMD5(content []byte) string {
	sum := md5.Sum(content)
	return hex.EncodeToString(sum[:])
}

// versionGate drops a delivery that repeats the one just before it, so a
// source that re-reads (polling, listener callbacks, re-reads after a
// reconnect) delivers each version once. The zero value passes the first
// delivery.
type versionGate struct {
	seen bool
	last string
}

// fresh reports whether d differs from the previous document passed to
// fresh, and remembers d. A deleted document is one version of its own.
func (g *versionGate) fresh(d Document) bool {
	v := "deleted"
	if !d.Deleted {
		v = d.MD5
		if v == "" {
			v = ContentMD5(d.Content)
		}
	}
	if g.seen && v == g.last {
		return false
	}
	g.seen, g.last = true, v
	return true
}
