package holdctx

import (
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/cfg"
	"golang.org/x/tools/go/types/typeutil"
)

// ---- check 6: a hold some path never releases ----

// checkLeak reports the hold h when a path of the function that took it
// reaches a return without releasing it: no Unlock or Release of it
// (deferred or not), and it is not handed on (returned, stored, sent, or
// passed to a function that may release it: see callees). The path where
// the acquisition's error is not nil (if err != nil, and any other
// condition on err) holds nothing and is not followed, until err is
// assigned again. To stay quiet
// when it cannot follow the hold, it leaves alone a hold that escapes, one
// used in a function literal other than a deferred one, one kept in a
// variable the acquisition does not declare, and _test.go files unless
// -testfiles is set.
func checkLeak(pass *analysis.Pass, h *hold, x *callees) {
	if h.escaped || h.reported || fixedLease(pass.TypesInfo, h.acq.call) {
		return
	}
	if !testFiles && strings.HasSuffix(pass.Fset.File(h.acq.call.Pos()).Name(), "_test.go") {
		return
	}
	// The acquisition must declare the variable: one that held something
	// before (hctx, err = l.Lock(hctx) chaining locks) is not followed.
	decl := h.acq.cur.Parent().Node()
	if h.v.Pos() < decl.Pos() || h.v.Pos() >= decl.End() {
		return
	}
	body := innermostBody(h.acq.cur)
	if body == nil || usedInClosure(pass.TypesInfo, body, h.derived) {
		return
	}
	g := cfg.New(body, mayReturn(pass.TypesInfo))
	start, at := findNode(g, h.acq.call)
	if start == nil {
		return
	}
	w := &leakWalk{info: pass.TypesInfo, x: x, h: h, seen: map[visit]bool{}}
	ret := w.from(start, at+1, h.errVar != nil)
	if ret == nil {
		return
	}
	l, m, n := types.ExprString(h.acq.recv), methodName(h.acq.call), namesOf(h.acq.call)
	line := strconv.Itoa(pass.Fset.Position(ret.Pos()).Line)
	pass.Report(analysis.Diagnostic{
		Pos: h.acq.call.Pos(),
		End: h.acq.call.End(),
		Message: "the hold " + h.v.Name() + " that " + l + "." + m + " returned is not released on every path: the return at line " +
			line + " leaves it held (under the watchdog, for the life of the process); defer " + l + "." + n.release + "(" + h.v.Name() +
			") right after the error check, or use " + l + "." + n.do,
	})
}

// leakWalk follows the paths from a hold's acquisition.
type leakWalk struct {
	info *types.Info
	x    *callees
	h    *hold
	seen map[visit]bool
}

// visit is a block reached with the acquisition's error still in its
// variable (errLive) or not.
type visit struct {
	b       *cfg.Block
	errLive bool
}

// from follows the paths from node i of block b and returns the first
// return statement a path reaches with the hold neither released nor
// handed on; nil when there is none. errLive: the acquisition's error
// variable still has the acquisition's error.
func (w *leakWalk) from(b *cfg.Block, i int, errLive bool) *ast.ReturnStmt {
	for ; i < len(b.Nodes); i++ {
		n := b.Nodes[i]
		if w.handles(n) {
			return nil
		}
		if ret, ok := n.(*ast.ReturnStmt); ok {
			return ret
		}
		if errLive && assigns(w.info, n, w.h.errVar) {
			errLive = false
		}
	}
	succs := b.Succs
	if len(succs) == 2 && len(b.Nodes) > 0 && errLive {
		if cond, ok := b.Nodes[len(b.Nodes)-1].(ast.Expr); ok {
			switch errBranch(w.info, cond, w.h.errVar) {
			case errOnTrue: // the true branch has an error, so no hold
				succs = succs[1:]
			case errOnFalse:
				succs = succs[:1]
			case errUnknown: // a condition on err this check cannot read
				return nil
			}
		}
	}
	for _, s := range succs {
		if w.seen[visit{s, errLive}] {
			continue
		}
		w.seen[visit{s, errLive}] = true
		if ret := w.from(s, 0, errLive); ret != nil {
			return ret
		}
	}
	return nil
}

// assigns reports whether node n assigns to v (outside function literals).
func assigns(info *types.Info, n ast.Node, v *types.Var) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if id, ok := ast.Unparen(l).(*ast.Ident); ok && info.ObjectOf(id) == v {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// handles reports whether node n ends the hold's story on this path: it
// releases it, defers its release, hands it on, or takes the lock again
// (a loop back to the acquisition).
func (w *leakWalk) handles(n ast.Node) bool {
	if n.Pos() <= w.h.acq.call.Pos() && w.h.acq.call.End() <= n.End() {
		return true
	}
	if d, ok := n.(*ast.DeferStmt); ok {
		return mentions(w.info, d.Call, w.h.derived)
	}
	handled := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			handled = handled || w.x.callHandsOn(n, w.h.derived, 0) || forces(w.info, n, w.h.acq.key) || closesClient(w.info, n)
		case *ast.UnaryExpr:
			handled = handled || waitsForEnd(w.info, n, w.h.derived)
		}
		return !handled
	})
	return handled
}

// Which branch of a condition on the acquisition's error has the error.
const (
	errNotTested = iota // the condition does not test err
	errOnTrue           // err != nil, errors.Is(err, ...), err != nil && ...
	errOnFalse          // err == nil, !errors.Is(err, ...)
	errUnknown          // any other use of err (assert.NoError(t, err), ...)
)

// errBranch says which branch of cond has a non-nil errVar.
func errBranch(info *types.Info, cond ast.Expr, errVar *types.Var) int {
	isErr := func(e ast.Expr) bool {
		id, ok := ast.Unparen(e).(*ast.Ident)
		return ok && info.Uses[id] == errVar
	}
	isNil := func(e ast.Expr) bool {
		id, ok := ast.Unparen(e).(*ast.Ident)
		return ok && id.Name == "nil"
	}
	switch e := ast.Unparen(cond).(type) {
	case *ast.BinaryExpr:
		isErrVsNil := isErr(e.X) && isNil(e.Y) || isNil(e.X) && isErr(e.Y)
		switch {
		case isErrVsNil && e.Op == token.NEQ:
			return errOnTrue
		case isErrVsNil && e.Op == token.EQL:
			return errOnFalse
		case e.Op == token.LAND && (errBranch(info, e.X, errVar) == errOnTrue || errBranch(info, e.Y, errVar) == errOnTrue):
			return errOnTrue
		}
	case *ast.UnaryExpr:
		if e.Op == token.NOT {
			switch errBranch(info, e.X, errVar) {
			case errOnTrue:
				return errOnFalse
			case errOnFalse:
				return errOnTrue
			}
		}
	case *ast.CallExpr:
		if fn, ok := typeutil.Callee(info, e).(*types.Func); ok && fn.Pkg() != nil && fn.Pkg().Path() == "errors" &&
			(fn.Name() == "Is" || fn.Name() == "As") && len(e.Args) == 2 && isErr(e.Args[0]) {
			return errOnTrue
		}
	}
	if mentions(info, cond, map[*types.Var]bool{errVar: true}) {
		return errUnknown
	}
	return errNotTested
}

// errDest returns the variable the acquisition's error is kept in, nil when
// it is discarded or not a plain variable.
func errDest(info *types.Info, cur inspector.Cursor) *types.Var {
	switch p := cur.Parent().Node().(type) {
	case *ast.AssignStmt:
		if len(p.Lhs) == 2 && len(p.Rhs) == 1 {
			return localVar(info, p.Lhs[1])
		}
	case *ast.ValueSpec:
		if len(p.Names) == 2 && len(p.Values) == 1 {
			return localVar(info, p.Names[1])
		}
	}
	return nil
}

// innermostBody returns the body of the innermost function around cur.
func innermostBody(cur inspector.Cursor) *ast.BlockStmt {
	for c := range cur.Enclosing((*ast.FuncDecl)(nil), (*ast.FuncLit)(nil)) {
		switch n := c.Node().(type) {
		case *ast.FuncDecl:
			return n.Body
		case *ast.FuncLit:
			return n.Body
		}
	}
	return nil
}

// usedInClosure reports whether a variable of set is used in a function
// literal in body other than one called by a defer statement: what runs
// there, and when, is not followed.
func usedInClosure(info *types.Info, body *ast.BlockStmt, set map[*types.Var]bool) bool {
	used := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.DeferStmt:
			if lit, ok := ast.Unparen(n.Call.Fun).(*ast.FuncLit); ok {
				for _, a := range n.Call.Args {
					used = used || mentions(info, a, set)
				}
				ast.Inspect(lit.Body, func(m ast.Node) bool {
					if inner, ok := m.(*ast.FuncLit); ok {
						used = used || mentions(info, inner, set)
						return false
					}
					return true
				})
				return false
			}
		case *ast.FuncLit:
			used = used || mentions(info, n, set)
			return false
		}
		return !used
	})
	return used
}

// findNode returns the block and index of the CFG node that contains call.
func findNode(g *cfg.CFG, call *ast.CallExpr) (*cfg.Block, int) {
	for _, b := range g.Blocks {
		for i, n := range b.Nodes {
			if n.Pos() <= call.Pos() && call.End() <= n.End() {
				return b, i
			}
		}
	}
	return nil, 0
}

// mayReturn says which calls return: not panic, os.Exit, runtime.Goexit,
// log's Fatal and Panic functions, nor a testing Fatal, FailNow or Skip.
func mayReturn(info *types.Info) func(*ast.CallExpr) bool {
	return func(ce *ast.CallExpr) bool {
		if id, ok := ast.Unparen(ce.Fun).(*ast.Ident); ok {
			if b, ok := info.Uses[id].(*types.Builtin); ok && b.Name() == "panic" {
				return false
			}
		}
		fn, ok := typeutil.Callee(info, ce).(*types.Func)
		if !ok || fn.Pkg() == nil {
			return true
		}
		name := fn.Name()
		switch fn.Pkg().Path() {
		case "os":
			return name != "Exit"
		case "runtime":
			return name != "Goexit"
		case "log":
			return !strings.HasPrefix(name, "Fatal") && !strings.HasPrefix(name, "Panic")
		case "testing":
			return !strings.HasPrefix(name, "Fatal") && name != "FailNow" && !strings.HasPrefix(name, "Skip")
		}
		return true
	}
}

// closesClient reports whether ce is a relock Client's Close: it releases
// every hold the Client has, this one too.
func closesClient(info *types.Info, ce *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(info, ce).(*types.Func)
	if !ok || fn.Name() != "Close" || fn.Pkg() == nil || !isRelock(fn.Pkg().Path()) {
		return false
	}
	recv := fn.Signature().Recv()
	return recv != nil && isNamed(recv.Type(), "Client")
}

// waitsForEnd reports whether u receives from the hold's Done channel
// (<-hctx.Done()): past it the hold has ended, released or lost.
func waitsForEnd(info *types.Info, u *ast.UnaryExpr, held map[*types.Var]bool) bool {
	if u.Op != token.ARROW {
		return false
	}
	ce, ok := ast.Unparen(u.X).(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := ast.Unparen(ce.Fun).(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Done" && len(ce.Args) == 0 && mentions(info, sel.X, held)
}
