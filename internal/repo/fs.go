package repo

import (
	"fmt"
	"io/fs"

	"payserver/migrations"
)

func fsSub(dir string) (fs.FS, error) {
	sub, err := fs.Sub(migrations.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", errNoMigrations, dir, err)
	}
	return sub, nil
}
