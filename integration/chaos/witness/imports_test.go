package witness

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNothingOfPayserver keeps the witness independent of the code
// it checks: no file of the package, tests included, may import a package
// of the payserver module.
func TestImportsNothingOfPayserver(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files found (%v)", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "payserver" || strings.HasPrefix(path, "payserver/") || strings.HasPrefix(path, "github.com/payserver/") {
				t.Errorf("%s imports %s: the witness must not share code with payserver", name, path)
			}
		}
	}
}
