package holdctx

import (
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/types/typeutil"
)

// ---- check 7: the parent context used where the hold is meant ----

// scope is where a hold is live and its parent context is still in reach:
// the statements after a Lock/TryLock in its block (up to a release of the
// hold), or the body of a Do callback.
type scope struct {
	stmts   []ast.Stmt
	parent  *types.Var          // the context the acquisition was given
	hold    string              // the hold's name, for the messages
	lock    ast.Expr            // the lock expression
	key     string              // its identity (exprKey)
	held    map[*types.Var]bool // the hold and the variables derived from it
	errVar  *types.Var          // the acquisition's error: its branch holds nothing
	assigns []assign            // the function's assignments, to find a lock's Client
}

// checkParentUses reports, in a hold's scope, a call given the parent
// context where the hold is meant: a Token or HoldCount of the same lock
// (the parent carries no owner of the hold); a nested Lock, TryLock or Do
// (it locks as a new owner while the hold is live: on the same lock it
// waits on its own hold); and work given the parent, which goes on when
// the lock is lost (the hold context ends then, the parent does not). It
// stays quiet when the parent is itself a hold (nested holds), on
// deferred calls, on the acquisition's error branch, on calls of
// package context, the log packages and OpenTelemetry, and in _test.go
// files unless -testfiles is set.
func checkParentUses(pass *analysis.Pass, s scope, holds map[*types.Var]bool) {
	if s.parent == nil || s.held[s.parent] || holds[s.parent] || len(s.stmts) == 0 {
		return
	}
	if !testFiles && strings.HasSuffix(pass.Fset.File(s.stmts[0].Pos()).Name(), "_test.go") {
		return // tests lock as several owners and probe with the parent on purpose
	}
	for _, st := range s.stmts {
		if releases(pass.TypesInfo, st, s.held) {
			return
		}
		reportParentIn(pass, s, st)
	}
}

// reportParentIn reports the calls of st (see checkParentUses).
func reportParentIn(pass *analysis.Pass, s scope, st ast.Stmt) {
	info := pass.TypesInfo
	ast.Inspect(st, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.DeferStmt:
			return false
		case *ast.IfStmt:
			if s.errVar != nil && errBranch(info, n.Cond, s.errVar) == errOnTrue {
				if n.Init != nil {
					ast.Inspect(n.Init, func(m ast.Node) bool { return reportCall(pass, s, m) })
				}
				if n.Else != nil {
					ast.Inspect(n.Else, func(m ast.Node) bool { return reportCall(pass, s, m) })
				}
				return false
			}
		}
		return reportCall(pass, s, n)
	})
}

// reportCall reports n if it is a call given the parent where the hold is
// meant; it says whether to look inside n.
func reportCall(pass *analysis.Pass, s scope, n ast.Node) bool {
	ce, ok := n.(*ast.CallExpr)
	if !ok {
		_, deferred := n.(*ast.DeferStmt)
		return !deferred
	}
	info := pass.TypesInfo
	i := parentArg(info, ce, s.parent)
	fn, _ := typeutil.Callee(info, ce).(*types.Func)
	if i < 0 || fn == nil || fn.Pkg() == nil {
		return true
	}
	if msg := parentMessage(info, ce, fn, i, s); msg != "" {
		pass.Report(analysis.Diagnostic{Pos: ce.Pos(), End: ce.End(), Message: strings.ReplaceAll(msg, "$P", s.parent.Name())})
	}
	return true
}

// parentMessage is the report for call ce of fn given the parent as
// argument i, "" when none is due.
func parentMessage(info *types.Info, ce *ast.CallExpr, fn *types.Func, i int, s scope) string {
	callee := calleeName(ce)
	l := types.ExprString(s.lock)
	if isRelock(fn.Pkg().Path()) {
		k, _ := classify(info, ce)
		sel, ok := ast.Unparen(ce.Fun).(*ast.SelectorExpr)
		if !ok || fn.Signature().Recv() == nil {
			return ""
		}
		nested := k == acquire && !isSemaphoreCall(ce) || isDo(info, ce) && !isSemaphoreDo(fn)
		switch {
		case nested && sameClient(info, s, sel.X):
			return callee + " is given $P while the hold " + s.hold + " of " + l + " is live: it locks as a new owner " +
				"(on " + l + " itself it waits on its own hold, and deadlock detection cannot see that " + s.hold +
				" waits); pass " + s.hold + " to nest the hold under it"
		case (fn.Name() == "Token" || fn.Name() == "HoldCount") && exprKey(info, sel.X) == s.key && s.key != "":
			return callee + " is given $P, not the hold " + s.hold + ": $P carries no owner of " + l +
				"'s hold; pass " + s.hold
		}
		return ""
	}
	if quietPackage(fn.Pkg().Path()) || !paramIsContext(fn.Signature(), i) {
		return ""
	}
	return callee + " is given $P, not the hold " + s.hold + ", while " + l + " is held: the work goes on if the lock " +
		"is lost (" + s.hold + " ends then, $P does not); pass " + s.hold + ", or context.WithoutCancel(" + s.hold +
		") where the work must finish"
}

// sameClient reports whether lock expression e is s's lock, or a lock of
// the same Client (c.Lock("a") and c.Lock("b"), directly or through local
// variables): a second owner of one Client is no other process. Locks of
// unknown Clients (parameters, several Clients standing for processes in
// one program) are left alone.
func sameClient(info *types.Info, s scope, e ast.Expr) bool {
	if k := exprKey(info, e); k != "" && k == s.key {
		return true
	}
	c := clientOf(info, s.assigns, e, 0)
	return c != "" && c == clientOf(info, s.assigns, s.lock, 0)
}

// clientOf returns the identity (exprKey) of the Client a lock expression
// was made by, "" when it is not known.
func clientOf(info *types.Info, assigns []assign, e ast.Expr, depth int) string {
	if depth > maxFollow {
		return ""
	}
	switch e := ast.Unparen(e).(type) {
	case *ast.CallExpr:
		sel, ok := ast.Unparen(e.Fun).(*ast.SelectorExpr)
		fn, _ := typeutil.Callee(info, e).(*types.Func)
		if !ok || fn == nil || fn.Pkg() == nil || !isRelock(fn.Pkg().Path()) || fn.Signature().Recv() == nil {
			return ""
		}
		if isNamed(fn.Signature().Recv().Type(), "Client") {
			return exprKey(info, sel.X)
		}
		return clientOf(info, assigns, sel.X, depth+1) // rw.WriteLock()
	case *ast.Ident:
		v, ok := info.Uses[e].(*types.Var)
		if !ok {
			return ""
		}
		found := ""
		for _, a := range assigns {
			if len(a.lhs) == 1 && localVar(info, a.lhs[0]) == v {
				if found != "" {
					return "" // assigned more than once
				}
				found = clientOf(info, assigns, a.rhs, depth+1)
				if found == "" {
					return ""
				}
			}
		}
		return found
	}
	return ""
}

// isNamed reports whether t is (a pointer to) relock's type name.
func isNamed(t types.Type, name string) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Name() == name && n.Obj().Pkg() != nil && isRelock(n.Obj().Pkg().Path())
}

// parentArg returns the index of the argument of ce that is the parent
// variable itself, -1 when none is.
func parentArg(info *types.Info, ce *ast.CallExpr, parent *types.Var) int {
	for i, a := range ce.Args {
		if id, ok := ast.Unparen(a).(*ast.Ident); ok && info.Uses[id] == parent {
			return i
		}
	}
	return -1
}

// releases reports whether st releases the hold (an Unlock or Release of
// it not deferred): the hold is no longer live after it.
func releases(info *types.Info, st ast.Stmt, held map[*types.Var]bool) bool {
	found := false
	ast.Inspect(st, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.DeferStmt, *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if k, _ := classify(info, n); k == release && len(n.Args) == 1 && mentions(info, n.Args[0], held) {
				found = true
			}
		}
		return !found
	})
	return found
}

// quietPackage: calls of these packages take a context for its values
// (logging, tracing) or derive one; giving them the parent is no mistake.
func quietPackage(path string) bool {
	switch path {
	case "context", "log", "log/slog", "runtime/trace":
		return true
	}
	return strings.HasPrefix(path, "go.opentelemetry.io/")
}

// paramIsContext reports whether parameter i of sig is a context.Context.
func paramIsContext(sig *types.Signature, i int) bool {
	params := sig.Params()
	if sig.Variadic() && i >= params.Len()-1 {
		return false
	}
	return i < params.Len() && isContext(params.At(i).Type())
}

// isSemaphoreDo reports whether fn is a Semaphore's Do, which takes
// permits of its own: like an Acquire, never a re-entry.
func isSemaphoreDo(fn *types.Func) bool {
	recv := fn.Signature().Recv()
	return recv != nil && isNamed(recv.Type(), "Semaphore")
}

// calleeName is how a message names the function ce calls: rdb.Decr, l.Token.
func calleeName(ce *ast.CallExpr) string {
	return types.ExprString(ce.Fun)
}

// lockScope returns the scope of the hold h: the statements after its
// acquisition in the block that holds it.
func lockScope(info *types.Info, h *hold, assigns []assign) (scope, bool) {
	if len(h.acq.call.Args) == 0 {
		return scope{}, false
	}
	stmts, ok := restOfBlock(h.acq.cur)
	if !ok {
		return scope{}, false
	}
	return scope{
		stmts: stmts, parent: localVar(info, h.acq.call.Args[0]), hold: h.v.Name(),
		lock: h.acq.recv, key: h.acq.key, held: h.derived, errVar: h.errVar, assigns: assigns,
	}, true
}

// restOfBlock returns the statements that follow the statement around cur
// in its block (or case clause). A hold taken in an if, switch or for
// statement's header is scoped to that statement: none.
func restOfBlock(cur inspector.Cursor) ([]ast.Stmt, bool) {
	c := cur
	for {
		if _, ok := c.Node().(ast.Stmt); ok {
			break
		}
		c = c.Parent()
		if c.Node() == nil {
			return nil, false
		}
	}
	var list []ast.Stmt
	switch p := c.Parent().Node().(type) {
	case *ast.BlockStmt:
		list = p.List
	case *ast.CaseClause:
		list = p.Body
	case *ast.CommClause:
		list = p.Body
	default:
		return nil, false
	}
	for i, s := range list {
		if s == c.Node() {
			return list[i+1:], true
		}
	}
	return nil, false
}

// doScopes returns the scope of each Do callback in fn: its body, where
// the callback's context parameter is the hold and Do's context argument
// the parent.
func doScopes(info *types.Info, fn inspector.Cursor) []scope {
	var out []scope
	assigns := collectAssigns(fn)
	for cur := range fn.Preorder((*ast.CallExpr)(nil)) {
		ce := cur.Node().(*ast.CallExpr)
		if !isDo(info, ce) && !isSemaphoreDoCall(info, ce) {
			continue
		}
		lit, ok := ast.Unparen(ce.Args[len(ce.Args)-1]).(*ast.FuncLit)
		if !ok {
			continue
		}
		ps := lit.Type.Params.List
		if len(ps) == 0 || len(ps[0].Names) == 0 {
			continue
		}
		hv, _ := info.Defs[ps[0].Names[0]].(*types.Var)
		if hv == nil {
			continue
		}
		recv := ast.Unparen(ce.Fun).(*ast.SelectorExpr).X
		out = append(out, scope{
			stmts: lit.Body.List, parent: localVar(info, ce.Args[0]), hold: hv.Name(),
			lock: recv, key: exprKey(info, recv), held: map[*types.Var]bool{hv: true}, assigns: assigns,
		})
	}
	return out
}

// isSemaphoreDoCall reports whether ce calls a Semaphore's Do(ctx, n, fn).
func isSemaphoreDoCall(info *types.Info, ce *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(info, ce).(*types.Func)
	return ok && fn.Name() == "Do" && fn.Pkg() != nil && isRelock(fn.Pkg().Path()) && isSemaphoreDo(fn) && len(ce.Args) == 3
}

// checkDoScopes runs check 7 on the Do callbacks of fn.
func checkDoScopes(pass *analysis.Pass, fn inspector.Cursor) {
	scopes := doScopes(pass.TypesInfo, fn)
	if len(scopes) == 0 {
		return
	}
	holds := deriveHolds(pass.TypesInfo, collectAssigns(fn), rootSet(holdRoots(pass.TypesInfo, fn)))
	for _, s := range scopes {
		checkParentUses(pass, s, holds)
	}
}

func rootSet(vs []*types.Var) map[*types.Var]bool {
	set := map[*types.Var]bool{}
	for _, v := range vs {
		set[v] = true
	}
	return set
}
