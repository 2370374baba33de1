// Package migrations holds payserver's versioned SQL schema, one folder per
// dialect, applied in order by goose (`payserver migrate`, or at start when
// PAYSERVER_AUTO_MIGRATE is true).
package migrations

import "embed"

// FS holds mysql/*.sql (MariaDB and MySQL) and sqlite/*.sql (the embedded
// default).
//
//go:embed mysql/*.sql sqlite/*.sql
var FS embed.FS
