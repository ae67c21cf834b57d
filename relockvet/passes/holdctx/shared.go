package holdctx

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/types/typeutil"
)

// ---- check 4: a hold context shared into goroutines that lock with it ----

// checkSharedHolds reports a relock Lock, TryLock or Do in a goroutine (a go
// statement, or a closure given to errgroup's or sync.WaitGroup's Go) whose
// context is a hold taken outside that goroutine, or derived from one
// without relock.NewOwner. The owner travels in the context, so every
// goroutine given the hold is the same owner: their Locks re-enter instead
// of excluding each other, silently. Only holds this function takes are
// followed (a Lock's or TryLock's first result, the context a Do callback
// receives); a context parameter may or may not be a hold, so it is left
// alone.
func checkSharedHolds(pass *analysis.Pass, fn inspector.Cursor) {
	info := pass.TypesInfo
	roots := holdRoots(info, fn)
	if len(roots) == 0 {
		return
	}
	assigns := collectAssigns(fn)
	reported := map[*ast.CallExpr]bool{} // nested goroutines see the same call
	for cur := range fn.Preorder((*ast.GoStmt)(nil), (*ast.CallExpr)(nil)) {
		body := goroutineBody(info, cur.Node())
		if body == nil {
			continue
		}
		outer := map[*types.Var]bool{}
		for _, v := range roots {
			if outside(v, body) {
				outer[v] = true
			}
		}
		if len(outer) == 0 {
			continue
		}
		reportSharedLocks(pass, body, deriveHolds(info, assigns, outer), reported)
	}
}

// holdRoots returns the local variables this function keeps holds in: the
// first result of a relock Lock or TryLock, and the context parameter of a
// function literal given to a relock Do.
func holdRoots(info *types.Info, fn inspector.Cursor) []*types.Var {
	var out []*types.Var
	for cur := range fn.Preorder((*ast.CallExpr)(nil)) {
		ce := cur.Node().(*ast.CallExpr)
		if isDo(info, ce) {
			if lit, ok := ast.Unparen(ce.Args[len(ce.Args)-1]).(*ast.FuncLit); ok {
				if ps := lit.Type.Params.List; len(ps) > 0 && len(ps[0].Names) > 0 {
					if v, ok := info.Defs[ps[0].Names[0]].(*types.Var); ok {
						out = append(out, v)
					}
				}
			}
			continue
		}
		if k, _ := classify(info, ce); k != acquire {
			continue
		}
		if dst, discarded := holdDest(cur); !discarded {
			if v := localVar(info, dst); v != nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// holdDest returns where the Lock or TryLock call at cur keeps its hold
// context: the first left-hand side of `hctx, err := l.Lock(ctx)` (or of a
// var declaration), nil when it goes elsewhere (return l.Lock(ctx), an
// argument); discarded when the call is a statement of its own or its hold
// is assigned to _.
func holdDest(cur inspector.Cursor) (dst ast.Expr, discarded bool) {
	switch p := cur.Parent().Node().(type) {
	case *ast.ExprStmt, *ast.GoStmt, *ast.DeferStmt:
		return nil, true
	case *ast.AssignStmt:
		if len(p.Rhs) == 1 && len(p.Lhs) == 2 {
			dst = p.Lhs[0]
		}
	case *ast.ValueSpec:
		if len(p.Values) == 1 && len(p.Names) == 2 {
			dst = p.Names[0]
		}
	}
	return dst, dst != nil && isBlank(dst)
}

// goroutineBody returns the code that runs in a new goroutine: the function
// literal of `go func() {...}()` or of g.Go(func() error {...}) (errgroup,
// sync.WaitGroup), or the call of `go l.Lock(hctx)` itself; nil for any
// other node.
func goroutineBody(info *types.Info, n ast.Node) ast.Node {
	switch n := n.(type) {
	case *ast.GoStmt:
		if lit, ok := ast.Unparen(n.Call.Fun).(*ast.FuncLit); ok {
			return lit
		}
		return n.Call
	case *ast.CallExpr:
		if !isGoMethod(info, n) || len(n.Args) != 1 {
			return nil
		}
		if lit, ok := ast.Unparen(n.Args[0]).(*ast.FuncLit); ok {
			return lit
		}
	}
	return nil
}

// isGoMethod reports whether ce calls Go or TryGo of errgroup.Group, or Go
// of sync.WaitGroup: each runs its function in a new goroutine.
func isGoMethod(info *types.Info, ce *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(info, ce).(*types.Func)
	if !ok || fn.Signature().Recv() == nil {
		return false
	}
	recv := fn.Signature().Recv().Type()
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	named, ok := types.Unalias(recv).(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	switch path, typ := named.Obj().Pkg().Path(), named.Obj().Name(); {
	case path == "golang.org/x/sync/errgroup" && typ == "Group":
		return fn.Name() == "Go" || fn.Name() == "TryGo"
	case path == "sync" && typ == "WaitGroup":
		return fn.Name() == "Go"
	}
	return false
}

// deriveHolds closes set over the function's assignments: a local context
// variable assigned from an expression that carries a variable of set
// (context.WithTimeout(hctx, d), errgroup.WithContext(hctx), c := hctx) is
// the same owner, unless the expression gives it a new one (NewOwner).
func deriveHolds(info *types.Info, assigns []assign, set map[*types.Var]bool) map[*types.Var]bool {
	out := make(map[*types.Var]bool, len(set))
	for v := range set {
		out[v] = true
	}
	for changed := true; changed; {
		changed = false
		for _, a := range assigns {
			if sharedVar(info, a.rhs, out) == nil {
				continue
			}
			for _, l := range a.lhs {
				if v := localVar(info, l); v != nil && !out[v] && isContext(v.Type()) {
					out[v] = true
					changed = true
				}
			}
		}
	}
	return out
}

// reportSharedLocks reports each relock Lock, TryLock or Do in body given a
// context that carries a variable of shared.
func reportSharedLocks(pass *analysis.Pass, body ast.Node, shared map[*types.Var]bool, reported map[*ast.CallExpr]bool) {
	info := pass.TypesInfo
	ast.Inspect(body, func(n ast.Node) bool {
		ce, ok := n.(*ast.CallExpr)
		if !ok || reported[ce] || len(ce.Args) == 0 {
			return true
		}
		if k, _ := classify(info, ce); (k != acquire || isSemaphoreCall(ce)) && !isDo(info, ce) {
			return true // a Semaphore's Acquire takes permits of its own, never re-enters
		}
		id := sharedVar(info, ce.Args[0], shared)
		if id == nil {
			return true
		}
		reported[ce] = true
		l, m := types.ExprString(ast.Unparen(ce.Fun).(*ast.SelectorExpr).X), methodName(ce)
		pass.Report(analysis.Diagnostic{
			Pos: ce.Pos(),
			End: ce.End(),
			Message: l + "." + m + " in a goroutine is given " + id.Name + ", a hold context taken outside it: " +
				"goroutines that share a hold context are one owner, so " + l + " re-enters instead of excluding them; " +
				"give the goroutine its own owner: " + l + "." + m + "(relock.NewOwner(" + id.Name + "), ...)",
		})
		return true
	})
}

// sharedVar returns an identifier in e that names a variable of set, not
// counting the arguments of relock.NewOwner and relock.WithOwner, which
// give the context a new owner; nil when there is none.
func sharedVar(info *types.Info, e ast.Expr, set map[*types.Var]bool) *ast.Ident {
	var found *ast.Ident
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if fn, ok := typeutil.Callee(info, n).(*types.Func); ok && fn.Pkg() != nil && isRelock(fn.Pkg().Path()) &&
				fn.Signature().Recv() == nil && (fn.Name() == "NewOwner" || fn.Name() == "WithOwner") {
				return false
			}
		case *ast.Ident:
			if v, ok := info.Uses[n].(*types.Var); ok && set[v] {
				found = n
			}
		}
		return found == nil
	})
	return found
}

// isDo reports whether ce calls Do(ctx, func(context.Context) error) of a
// relock lock: the scoped form, which locks with its context too.
func isDo(info *types.Info, ce *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(info, ce).(*types.Func)
	if !ok || fn.Name() != "Do" || fn.Pkg() == nil || !isRelock(fn.Pkg().Path()) || fn.Signature().Recv() == nil {
		return false
	}
	params := fn.Signature().Params()
	return params.Len() == 2 && isContext(params.At(0).Type()) && len(ce.Args) == 2
}
