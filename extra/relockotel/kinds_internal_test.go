package relockotel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relock-go/relock"
)

// relockKinds reads the Kind constants the relock package declares, from
// its source (this module replaces it with ../..), so that a kind added
// there and not here fails this test.
func relockKinds(t *testing.T) []relock.Kind {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []relock.Kind
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Kind" || len(vs.Values) != len(vs.Names) {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: a Kind constant that is not a literal", f)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, relock.Kind(s))
				}
			}
		}
	}
	if len(out) < 8 {
		t.Fatalf("found only the kinds %v in the relock package", out)
	}
	return out
}

// Every kind of relock's events has its lock.kind value, built once, and
// the README lists it.
func TestEveryRelockKindHasAnOTelValue(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile("`lock.kind` is ([^.]*)").FindSubmatch(readme)
	if listed == nil {
		t.Fatal("the README does not list the values of lock.kind")
	}
	for _, k := range relockKinds(t) {
		found := false
		for _, known := range kinds {
			found = found || known == k
		}
		if !found {
			t.Errorf("relock.Kind %q has no lock.kind value of its own here", k)
		}
		if !strings.Contains(string(listed[1]), "`"+string(k)+"`") {
			t.Errorf("the README's list of lock.kind values (%s) omits %q", listed[1], k)
		}
	}
}
