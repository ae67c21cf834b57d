package relock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedisCallsOnlyThroughTheFunnel keeps the funnel the one place where
// a Redis call is run, its fault noted and its error wrapped (call.go): no
// other non-test file calls scriptCall.run (on a go-redis client, rdb),
// noteFault or wrapRedis, except
// where each is defined or has a reason of its own (listed here).
func TestRedisCallsOnlyThroughTheFunnel(t *testing.T) {
	allowed := map[string][]string{
		"run":       {"call.go", "coalesce.go", "scripts.go"},
		"noteFault": {"call.go", "faults.go", "pubsub_conn.go"}, // the subscriber's connections are not requests
		"wrapRedis": {"call.go", "client.go"},
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var fn string
			switch e := call.Fun.(type) {
			case *ast.Ident:
				fn = e.Name
			case *ast.SelectorExpr:
				fn = e.Sel.Name
			}
			if fn == "run" && !onRedis(call) {
				return true // another type's run
			}
			if files, ok := allowed[fn]; ok && !contains(files, name) {
				t.Errorf("%s: %s called outside the funnel (call.go)", fset.Position(call.Pos()), fn)
			}
			return true
		})
	}
}

// onRedis reports whether call's last argument is a go-redis client (named
// rdb), as scriptCall.run's is.
func onRedis(call *ast.CallExpr) bool {
	if len(call.Args) != 2 {
		return false
	}
	switch a := call.Args[1].(type) {
	case *ast.Ident:
		return a.Name == "rdb"
	case *ast.SelectorExpr:
		return a.Sel.Name == "rdb"
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
