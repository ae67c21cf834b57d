package holdctx

import (
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/types/typeutil"
)

// Analyzer reports misuse of relock hold contexts.
var Analyzer = &analysis.Analyzer{
	Name:     "holdctx",
	Doc:      doc,
	URL:      "https://pkg.go.dev/github.com/relock-go/relock/relockvet/passes/holdctx",
	Requires: []*analysis.Analyzer{inspect.Analyzer},
	Run:      run,
}

// testFiles is the -testfiles flag.
var testFiles bool

func init() {
	Analyzer.Flags.BoolVar(&testFiles, "testfiles", false,
		"also report discarded hold contexts in _test.go files (off by default: tests often try "+
			"a lock they expect not to get, _, err := l.TryLock(ctx, 0, 0))")
}

// relockPath is the import path of the library.
const relockPath = "github.com/relock-go/relock"

type kind int

const (
	notLock kind = iota
	acquire      // Lock, TryLock, Acquire or TryAcquire: returns (hold context.Context, error)
	release      // Unlock or Release(hold context.Context) error
)

// call is one Lock/TryLock/Unlock (or a Semaphore's Acquire/TryAcquire/
// Release) call on a relock lock.
type call struct {
	cur  inspector.Cursor // the *ast.CallExpr
	call *ast.CallExpr
	kind kind
	recv ast.Expr // the lock expression (l in l.Lock(ctx))
	key  string   // identity of recv, "" if it is not a stable expression
}

func run(pass *analysis.Pass) (any, error) {
	in := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)

	// Group the calls by outermost function: check 2 looks at every lock
	// call of a function, including those in its function literals.
	type unit struct {
		cur   inspector.Cursor
		calls []call
	}
	var units []*unit
	byUnit := map[inspector.Cursor]*unit{}

	for cur := range in.Root().Preorder((*ast.CallExpr)(nil)) {
		ce := cur.Node().(*ast.CallExpr)
		k, recv := classify(pass.TypesInfo, ce)
		if k == notLock {
			continue
		}
		c := call{cur: cur, call: ce, kind: k, recv: recv, key: exprKey(pass.TypesInfo, recv)}
		if k == acquire {
			checkDiscarded(pass, c)
			if !isSemaphoreCall(ce) { // an Acquire is never a re-entry
				checkLoopReassign(pass, c)
			}
		}
		fn, ok := outermostFunc(cur)
		if !ok {
			continue
		}
		u := byUnit[fn]
		if u == nil {
			u = &unit{cur: fn}
			byUnit[fn] = u
			units = append(units, u)
		}
		u.calls = append(u.calls, c)
	}
	x := newCallees(pass.TypesInfo, pass.Pkg, in.Root())
	for _, u := range units {
		checkUnlocks(pass, u.cur, u.calls, x)
	}
	for cur := range in.Root().Preorder((*ast.FuncDecl)(nil), (*ast.FuncLit)(nil)) {
		if fn, ok := outermostFunc(cur); ok && fn == cur {
			checkSharedHolds(pass, cur)
			checkDoScopes(pass, cur)
		}
	}
	return nil, nil
}

// classify says whether ce calls Lock/TryLock (acquire) or Unlock (release)
// of a relock lock type, or a Semaphore's Acquire/TryAcquire or Release,
// and returns the lock expression. A method counts by its package and
// signature, so every lock type of the library (and any later one) is
// covered, while (*relock.Client).Lock(name) *Lock is not.
func classify(info *types.Info, ce *ast.CallExpr) (kind, ast.Expr) {
	sel, ok := ast.Unparen(ce.Fun).(*ast.SelectorExpr)
	if !ok {
		return notLock, nil
	}
	fn, ok := typeutil.Callee(info, ce).(*types.Func)
	if !ok || fn.Pkg() == nil || !isRelock(fn.Pkg().Path()) {
		return notLock, nil
	}
	sig := fn.Signature()
	if sig.Recv() == nil {
		return notLock, nil
	}
	params, results := sig.Params(), sig.Results()
	switch fn.Name() {
	case "Lock", "TryLock", "Acquire", "TryAcquire":
		if params.Len() >= 1 && isContext(params.At(0).Type()) &&
			results.Len() == 2 && isContext(results.At(0).Type()) && isError(results.At(1).Type()) {
			return acquire, sel.X
		}
	case "Unlock", "Release":
		if params.Len() == 1 && isContext(params.At(0).Type()) &&
			results.Len() == 1 && isError(results.At(0).Type()) {
			return release, sel.X
		}
	}
	return notLock, nil
}

// isSemaphoreCall reports whether ce is a Semaphore's Acquire, TryAcquire
// or Release (classify has said it is a relock acquire or release).
func isSemaphoreCall(ce *ast.CallExpr) bool {
	switch methodName(ce) {
	case "Acquire", "TryAcquire", "Release":
		return true
	}
	return false
}

// names is how the messages call the methods of the lock type of a call:
// a Semaphore's or a lock's.
type names struct {
	acquire, release, do string
}

func namesOf(ce *ast.CallExpr) names {
	if isSemaphoreCall(ce) {
		return names{"Acquire/TryAcquire", "Release", "Do(ctx, n, func(ctx context.Context) error {...})"}
	}
	return names{"Lock/TryLock", "Unlock", "Do(ctx, func(ctx context.Context) error {...})"}
}

func isRelock(path string) bool {
	if i := strings.LastIndex(path, "/vendor/"); i >= 0 {
		path = path[i+len("/vendor/"):]
	}
	return path == relockPath
}

func isContext(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	obj := n.Obj()
	return obj.Pkg() != nil && obj.Pkg().Path() == "context" && obj.Name() == "Context"
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}

// ---- check 1: discarded hold context ----

func checkDiscarded(pass *analysis.Pass, c call) {
	parent := c.cur.Parent()
	discarded := false
	switch p := parent.Node().(type) {
	case *ast.ExprStmt, *ast.GoStmt, *ast.DeferStmt:
		discarded = true
	case *ast.AssignStmt:
		discarded = len(p.Rhs) == 1 && len(p.Lhs) == 2 && isBlank(p.Lhs[0])
	case *ast.ValueSpec:
		discarded = len(p.Values) == 1 && len(p.Names) == 2 && p.Names[0].Name == "_"
	}
	if !discarded {
		return
	}
	if isSemaphoreCall(c.call) && fixedLease(pass.TypesInfo, c.call) {
		return // a permit taken for its lease: an expirable permit, a rate limit
	}
	if !testFiles && strings.HasSuffix(pass.Fset.File(c.call.Pos()).Name(), "_test.go") {
		return
	}
	l, m, n := types.ExprString(c.recv), methodName(c.call), namesOf(c.call)
	pass.Report(analysis.Diagnostic{
		Pos: c.call.Pos(),
		End: c.call.End(),
		Message: "the hold context returned by " + l + "." + m + " is discarded: nothing can " + n.release + " this hold " +
			"(under the watchdog it stays held for the life of the process); use " + l + "." + n.do + ", " +
			"or keep the returned context (hctx, err := " + l + "." + m + "(...)) and pass it to " + l + "." + n.release + "(hctx)",
	})
}

func isBlank(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && id.Name == "_"
}

func methodName(ce *ast.CallExpr) string {
	return ast.Unparen(ce.Fun).(*ast.SelectorExpr).Sel.Name
}

// ---- check 3: ctx, err = l.Lock(ctx) in a loop ----

func checkLoopReassign(pass *analysis.Pass, c call) {
	as, ok := c.cur.Parent().Node().(*ast.AssignStmt)
	if !ok || as.Tok != token.ASSIGN || len(as.Lhs) != 2 || len(as.Rhs) != 1 || len(c.call.Args) == 0 {
		return
	}
	lhs, ok1 := ast.Unparen(as.Lhs[0]).(*ast.Ident)
	arg, ok2 := ast.Unparen(c.call.Args[0]).(*ast.Ident)
	if !ok1 || !ok2 {
		return
	}
	v, ok := pass.TypesInfo.Uses[lhs].(*types.Var)
	if !ok || v != pass.TypesInfo.Uses[arg] {
		return
	}
	// The lock must be the same one on every iteration: a variable (or a
	// field of one) that the loop does not redeclare. Chaining a different
	// lock each time (for _, l := range locks { ctx, err = l.Lock(ctx) })
	// is not a re-entry.
	root := rootVar(pass.TypesInfo, c.recv)
	if root == nil {
		return
	}
	// Is there a loop around the assignment that the variable outlives?
	// A for statement's init variables are carried from one iteration to
	// the next, so only its body counts as inside; range variables are
	// fresh each iteration, so the whole range statement does.
	for loop := range c.cur.Enclosing((*ast.ForStmt)(nil), (*ast.RangeStmt)(nil)) {
		var inside ast.Node = loop.Node()
		if f, ok := inside.(*ast.ForStmt); ok {
			inside = f.Body
		}
		if outside(v, inside) && outside(root, inside) {
			l, m := types.ExprString(c.recv), methodName(c.call)
			pass.Report(analysis.Diagnostic{
				Pos: as.Pos(),
				End: as.End(),
				Message: lhs.Name + ", " + types.ExprString(as.Lhs[1]) + " = " + l + "." + m + "(" + lhs.Name + ") in a loop re-enters the hold " +
					"on every iteration after the first (" + lhs.Name + " already holds it); use " + l + ".Do " +
					"in the loop body, or keep the hold in a new variable (hctx, err := " + l + "." + m +
					"(...)) and pass it to " + l + ".Unlock(hctx) before the next iteration",
			})
			return
		}
	}
}

func outside(v *types.Var, n ast.Node) bool {
	return v.Pos() < n.Pos() || v.Pos() >= n.End()
}

// rootVar returns the variable a lock expression starts from (l, s in
// s.mu, p in *p), or nil for other expressions (calls, index expressions).
func rootVar(info *types.Info, e ast.Expr) *types.Var {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		v, _ := info.Uses[e].(*types.Var)
		return v
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[e]; ok {
			if sel.Kind() == types.FieldVal {
				return rootVar(info, e.X)
			}
			return nil
		}
		v, _ := info.Uses[e.Sel].(*types.Var) // pkg.Var
		return v
	case *ast.StarExpr:
		return rootVar(info, e.X)
	}
	return nil
}

// escapes reports whether a variable of set leaves the function's view:
// returned, sent on a channel, put in a composite literal or appended, or
// its address taken.
func escapes(info *types.Info, fn inspector.Cursor, set map[*types.Var]bool) bool {
	for cur := range fn.Preorder((*ast.ReturnStmt)(nil), (*ast.SendStmt)(nil), (*ast.CompositeLit)(nil),
		(*ast.UnaryExpr)(nil), (*ast.CallExpr)(nil)) {
		var vals []ast.Expr
		switch n := cur.Node().(type) {
		case *ast.ReturnStmt:
			vals = n.Results
		case *ast.SendStmt:
			vals = []ast.Expr{n.Value}
		case *ast.CompositeLit:
			vals = n.Elts
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				vals = []ast.Expr{n.X}
			}
		case *ast.CallExpr:
			if id, ok := ast.Unparen(n.Fun).(*ast.Ident); ok {
				if b, ok := info.Uses[id].(*types.Builtin); ok && b.Name() == "append" {
					vals = n.Args
				}
			}
		}
		for _, e := range vals {
			if flows(info, e, set) {
				return true
			}
		}
	}
	return false
}

// flows reports whether the value of e is (or carries) a variable of set:
// the variable itself, a context derived from it by a function of package
// context, or a composite literal or key-value pair holding one.
func flows(info *types.Info, e ast.Expr, set map[*types.Var]bool) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		v, ok := info.Uses[e].(*types.Var)
		return ok && set[v]
	case *ast.KeyValueExpr:
		return flows(info, e.Value, set)
	case *ast.CompositeLit:
		for _, el := range e.Elts {
			if flows(info, el, set) {
				return true
			}
		}
	case *ast.CallExpr:
		if fn, ok := typeutil.Callee(info, e).(*types.Func); ok && fn.Pkg() != nil && fn.Pkg().Path() == "context" {
			for _, a := range e.Args {
				if flows(info, a, set) {
					return true
				}
			}
		}
	}
	return false
}

// localVar returns the variable e names, if e is a plain identifier.
func localVar(info *types.Info, e ast.Expr) *types.Var {
	if e == nil {
		return nil
	}
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return nil
	}
	v, _ := info.ObjectOf(id).(*types.Var)
	if v == nil || v.IsField() {
		return nil
	}
	return v
}

type assign struct {
	lhs []ast.Expr
	rhs ast.Expr
}

// collectAssigns lists the assignments and var declarations in fn, pairing
// each left-hand side with its value (or every left-hand side with a single
// multi-valued right-hand side).
func collectAssigns(fn inspector.Cursor) []assign {
	var out []assign
	add := func(lhs []ast.Expr, rhs []ast.Expr) {
		switch {
		case len(lhs) == len(rhs):
			for i := range lhs {
				out = append(out, assign{lhs: lhs[i : i+1], rhs: rhs[i]})
			}
		case len(rhs) == 1:
			out = append(out, assign{lhs: lhs, rhs: rhs[0]})
		}
	}
	for cur := range fn.Preorder((*ast.AssignStmt)(nil), (*ast.ValueSpec)(nil)) {
		switch n := cur.Node().(type) {
		case *ast.AssignStmt:
			add(n.Lhs, n.Rhs)
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(n.Names))
			for i, id := range n.Names {
				lhs[i] = id
			}
			add(lhs, n.Values)
		}
	}
	return out
}

// mentions reports whether e refers to a variable of set.
func mentions(info *types.Info, e ast.Expr, set map[*types.Var]bool) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if v, ok := info.Uses[id].(*types.Var); ok && set[v] {
				found = true
			}
		}
		return !found
	})
	return found
}

// isFuncLitParam reports whether v is a parameter of a function literal in
// fn: its value comes from the literal's callers, which are not followed.
func isFuncLitParam(fn inspector.Cursor, v *types.Var) bool {
	for cur := range fn.Preorder((*ast.FuncLit)(nil)) {
		ft := cur.Node().(*ast.FuncLit).Type
		if v.Pos() >= ft.Pos() && v.Pos() < ft.End() {
			return true
		}
	}
	return false
}

// outermostFunc returns the outermost function declaration or literal
// around cur.
func outermostFunc(cur inspector.Cursor) (inspector.Cursor, bool) {
	var out inspector.Cursor
	found := false
	for c := range cur.Enclosing((*ast.FuncDecl)(nil), (*ast.FuncLit)(nil)) {
		out, found = c, true
	}
	return out, found
}

// exprKey identifies a lock expression: a variable, or a chain of field
// selections on one (l, s.mu, s.locks.a). Other expressions (calls, index
// expressions) are not stable and get "".
func exprKey(info *types.Info, e ast.Expr) string {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		if v, ok := info.Uses[e].(*types.Var); ok {
			return objKey(v)
		}
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[e]; ok {
			if sel.Kind() != types.FieldVal {
				return ""
			}
			if base := exprKey(info, e.X); base != "" {
				return base + "." + e.Sel.Name
			}
			return ""
		}
		// A qualified identifier: pkg.Var.
		if v, ok := info.Uses[e.Sel].(*types.Var); ok {
			return objKey(v)
		}
	case *ast.StarExpr:
		if base := exprKey(info, e.X); base != "" {
			return "*" + base
		}
	}
	return ""
}

// objKey is unique per object: its name, package and declaration position.
func objKey(v *types.Var) string {
	pkg := ""
	if v.Pkg() != nil {
		pkg = v.Pkg().Path()
	}
	return pkg + "." + v.Name() + "@" + strconv.Itoa(int(v.Pos()))
}
