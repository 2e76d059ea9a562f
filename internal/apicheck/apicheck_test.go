package apicheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// root is the repository, found from this package's directory.
var root = filepath.Join("..", "..")

// notLibrary are the top-level directories that hold no public package.
var notLibrary = map[string]bool{"internal": true, "cmd": true, "examples": true, "deploy": true, "docs": true, "scripts": true}

// publicFiles parses the non-test Go files of every public package and
// calls f with each file's package path (relative to the root) and syntax.
func publicFiles(t *testing.T, f func(pkg string, file *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			if notLibrary[top] || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		f(filepath.ToSlash(filepath.Dir(rel)), file)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isOption reports whether a function's results are one option type: a
// type named Option or ending in Option (LimitOption), of this package or
// another.
func isOption(results *ast.FieldList) bool {
	if results == nil || len(results.List) != 1 || len(results.List[0].Names) > 1 {
		return false
	}
	var name string
	switch e := results.List[0].Type.(type) {
	case *ast.Ident:
		name = e.Name
	case *ast.SelectorExpr:
		name = e.Sel.Name
	}
	return strings.HasSuffix(name, "Option")
}

// TestOptionsAreWith: every exported function of the library returning an
// option is named With…, so that a reader finds a package's options
// together and tells them from its other functions. A middleware's Limit is
// the exception: it declares a limit, what the middleware enforces, rather
// than adjusting how it works, and is given once per limit.
func TestOptionsAreWith(t *testing.T) {
	exceptions := map[string]bool{"httplimit.Limit": true, "grpclimit.Limit": true}
	checked := 0
	publicFiles(t, func(pkg string, file *ast.File) {
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || !isOption(fn.Type.Results) {
				continue
			}
			checked++
			name := file.Name.Name + "." + fn.Name.Name
			if !strings.HasPrefix(fn.Name.Name, "With") && !exceptions[name] {
				t.Errorf("%s (in %s) returns an option but is not named With…", name, pkg)
			}
		}
	})
	if checked < 20 {
		t.Fatalf("found only %d option functions: is the walk looking at the library?", checked)
	}
}

// TestCloseIsCloser: an exported Close of the library is Close() error, as
// io.Closer, the one shape; a close that needs a context is Shutdown(ctx),
// as net/http's Server has it.
func TestCloseIsCloser(t *testing.T) {
	checked := 0
	publicFiles(t, func(pkg string, file *ast.File) {
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "Close" || !exportedReceiver(fn) {
				continue
			}
			checked++
			res := fn.Type.Results
			isErr := res != nil && len(res.List) == 1 && len(res.List[0].Names) <= 1
			if isErr {
				id, _ := res.List[0].Type.(*ast.Ident)
				isErr = id != nil && id.Name == "error"
			}
			if fn.Type.Params.NumFields() != 0 || !isErr {
				t.Errorf("a Close in %s is not Close() error", pkg)
			}
		}
	})
	if checked == 0 {
		t.Fatal("found no Close: is the walk looking at the library?")
	}
}

// exportedReceiver reports whether fn is a method of an exported type.
func exportedReceiver(fn *ast.FuncDecl) bool {
	if fn.Recv == nil || len(fn.Recv.List) != 1 {
		return false
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// Every store of the library closes the same way, so a program closes
// whichever it opened without knowing which.
var (
	_ io.Closer = (*memory.Store)(nil)
	_ io.Closer = (*redisstore.Store)(nil)
	_ io.Closer = (*failover.Store)(nil)
	_ io.Closer = (*lease.Store)(nil)
)
