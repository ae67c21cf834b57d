package holdctx

import (
	"go/ast"
	"go/constant"
	"go/types"

	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/types/typeutil"
)

// ---- check 6's helpers: what hands a hold on ----

// maxFollow bounds how deep handsOnParam follows calls of calls.
const maxFollow = 8

// callees answers, for the functions declared in the package under
// analysis, whether a call may release (or otherwise hand on) a hold it is
// given. A function declared elsewhere, called through an interface or a
// function value, or too deep to follow, may: it is not read.
type callees struct {
	info  *types.Info
	pkg   *types.Package
	root  inspector.Cursor
	decls map[*types.Func]*ast.FuncDecl // built on first use
	memo  map[param]bool
}

// param is parameter i of fn.
type param struct {
	fn *types.Func
	i  int
}

func newCallees(info *types.Info, pkg *types.Package, root inspector.Cursor) *callees {
	return &callees{info: info, pkg: pkg, root: root, memo: map[param]bool{}}
}

// callHandsOn reports whether call ce releases a hold whose variables are
// set (an Unlock or Release given it), or passes it to a function that may
// release it (see callees). Other functions of relock and those of package
// context do not.
func (x *callees) callHandsOn(ce *ast.CallExpr, set map[*types.Var]bool, depth int) bool {
	fn, _ := typeutil.Callee(x.info, ce).(*types.Func)
	if fn != nil && fn.Pkg() != nil {
		if isRelock(fn.Pkg().Path()) {
			k, _ := classify(x.info, ce)
			return k == release && len(ce.Args) == 1 && mentions(x.info, ce.Args[0], set)
		}
		if fn.Pkg().Path() == "context" {
			return false
		}
	}
	for i, a := range ce.Args {
		if !flows(x.info, a, set) {
			continue
		}
		if x.cannotRelease(ce, fn) {
			continue
		}
		if !x.followable(ce, fn, i) || depth >= maxFollow || x.handsOnParam(fn.Origin(), i, depth) {
			return true
		}
	}
	return false
}

// cannotRelease reports whether ce, a call of a function declared in
// another package (a go-redis command, a database call), is given no lock
// to release a hold with: neither its receiver nor any argument is or
// carries a relock value or a function. Such a call only uses the hold
// (rdb.Decr(hctx, "stock")), so the path goes on past it. A function value
// and a method of an interface declared in this package, whose code is
// not known, may release it.
func (x *callees) cannotRelease(ce *ast.CallExpr, fn *types.Func) bool {
	if fn == nil || fn.Pkg() == nil || fn.Pkg() == x.pkg {
		return false
	}
	if recv := fn.Signature().Recv(); recv != nil && types.IsInterface(recv.Type()) {
		if n, ok := types.Unalias(recv.Type()).(*types.Named); !ok || n.Obj().Pkg() == x.pkg {
			return false
		}
	}
	if sel, ok := ast.Unparen(ce.Fun).(*ast.SelectorExpr); ok {
		if s, ok := x.info.Selections[sel]; ok && s.Kind() == types.MethodVal && carriesLock(x.info.TypeOf(sel.X)) {
			return false
		}
	}
	for _, a := range ce.Args {
		if carriesLock(x.info.TypeOf(a)) {
			return false
		}
	}
	return true
}

// carriesLock reports whether a value of type t is, holds or can reach a
// relock value (a lock, a Semaphore, a Client that makes locks), or is a
// function, which may close over one. Interface values count by their
// methods: one with an Unlock or Release method may be a lock.
func carriesLock(t types.Type) bool {
	return carries(t, map[types.Type]bool{})
}

func carries(t types.Type, seen map[types.Type]bool) bool {
	if t == nil || seen[t] {
		return false
	}
	seen[t] = true
	switch u := types.Unalias(t).(type) {
	case *types.Named:
		if u.Obj().Pkg() != nil && isRelock(u.Obj().Pkg().Path()) {
			return true
		}
		return carries(u.Underlying(), seen)
	case *types.Pointer:
		return carries(u.Elem(), seen)
	case *types.Slice:
		return carries(u.Elem(), seen)
	case *types.Array:
		return carries(u.Elem(), seen)
	case *types.Map:
		return carries(u.Key(), seen) || carries(u.Elem(), seen)
	case *types.Chan:
		return carries(u.Elem(), seen)
	case *types.Signature:
		return true
	case *types.Struct:
		for i := range u.NumFields() {
			if carries(u.Field(i).Type(), seen) {
				return true
			}
		}
	case *types.Interface:
		for i := range u.NumMethods() {
			if n := u.Method(i).Name(); n == "Unlock" || n == "Release" {
				return true
			}
		}
	}
	return false
}

// followable reports whether argument i of ce is parameter i of fn, a
// function of this package whose body is read: not a method expression
// (T.m(recv, ...)), not a variadic argument.
func (x *callees) followable(ce *ast.CallExpr, fn *types.Func, i int) bool {
	if fn == nil || fn.Pkg() != x.pkg || ce.Ellipsis.IsValid() {
		return false
	}
	if sel, ok := ast.Unparen(ce.Fun).(*ast.SelectorExpr); ok {
		if s, ok := x.info.Selections[sel]; ok && s.Kind() == types.MethodExpr {
			return false
		}
	}
	sig := fn.Signature()
	return i < sig.Params().Len() && !(sig.Variadic() && i >= sig.Params().Len()-1)
}

// handsOnParam reports whether fn may release, store, return, send or pass
// on to a function that may, what it is given as parameter i. A call that
// comes back to fn while it is being read (recursion) is taken to.
func (x *callees) handsOnParam(fn *types.Func, i, depth int) bool {
	k := param{fn, i}
	if v, ok := x.memo[k]; ok {
		return v
	}
	x.memo[k] = true
	v := x.followParam(fn, i, depth)
	x.memo[k] = v
	return v
}

func (x *callees) followParam(fn *types.Func, i, depth int) bool {
	decl := x.declOf(fn)
	if decl == nil || decl.Body == nil {
		return true
	}
	p := paramVar(x.info, decl, i)
	if p == nil {
		return false // unnamed or _: never used
	}
	cur, ok := x.root.FindNode(decl)
	if !ok {
		return true
	}
	h := &hold{v: p, derived: map[*types.Var]bool{p: true}}
	deriveHold(x.info, cur, collectAssigns(cur), h)
	if h.escaped || usedInClosure(x.info, decl.Body, h.derived) {
		return true
	}
	found := false
	ast.Inspect(decl.Body, func(n ast.Node) bool {
		if ce, ok := n.(*ast.CallExpr); ok && x.callHandsOn(ce, h.derived, depth+1) {
			found = true
		}
		return !found
	})
	return found
}

// declOf returns the declaration of fn in the package's files, nil when it
// has none there.
func (x *callees) declOf(fn *types.Func) *ast.FuncDecl {
	if x.decls == nil {
		x.decls = map[*types.Func]*ast.FuncDecl{}
		for cur := range x.root.Preorder((*ast.FuncDecl)(nil)) {
			d := cur.Node().(*ast.FuncDecl)
			if f, ok := x.info.Defs[d.Name].(*types.Func); ok {
				x.decls[f] = d
			}
		}
	}
	return x.decls[fn]
}

// paramVar returns the variable of parameter i of decl, nil when it is
// unnamed or _.
func paramVar(info *types.Info, decl *ast.FuncDecl, i int) *types.Var {
	n := 0
	for _, f := range decl.Type.Params.List {
		if len(f.Names) == 0 {
			n++
			continue
		}
		for _, id := range f.Names {
			if n == i {
				if id.Name == "_" {
					return nil
				}
				v, _ := info.Defs[id].(*types.Var)
				return v
			}
			n++
		}
	}
	return nil
}

// errorType is the error interface.
var errorType = types.Universe.Lookup("error").Type().Underlying().(*types.Interface)

// cannotHold reports whether a variable of type t cannot be (or carry) a
// hold it is computed from, unless the hold itself is stored in it: a
// number, a string, a bool, an error (err := validate(hctx) is not the hold
// handed on).
func cannotHold(t types.Type) bool {
	if _, ok := t.Underlying().(*types.Basic); ok {
		return true
	}
	return types.Implements(t, errorType) && !isContext(t)
}

// forces reports whether ce is a ForceUnlock or ForceRelease of the lock
// whose expression has key: it ends every hold of that lock, this one too.
func forces(info *types.Info, ce *ast.CallExpr, key string) bool {
	sel, ok := ast.Unparen(ce.Fun).(*ast.SelectorExpr)
	if !ok || key == "" || (sel.Sel.Name != "ForceUnlock" && sel.Sel.Name != "ForceRelease") {
		return false
	}
	fn, ok := typeutil.Callee(info, ce).(*types.Func)
	return ok && fn.Pkg() != nil && isRelock(fn.Pkg().Path()) && exprKey(info, sel.X) == key
}

// fixedLease reports whether ce, a TryLock or TryAcquire, gives its hold
// a constant lease above 0: the hold is not renewed and ends by itself
// when its lease runs out, which code may mean (a lock left to lapse; a
// permit kept for its lease, as a rate limit): check 6 leaves such a hold
// alone, and check 1 a discarded permit of one.
func fixedLease(info *types.Info, ce *ast.CallExpr) bool {
	switch methodName(ce) {
	case "TryLock", "TryAcquire":
	default:
		return false
	}
	if len(ce.Args) == 0 {
		return false
	}
	tv, ok := info.Types[ce.Args[len(ce.Args)-1]]
	return ok && tv.Value != nil && constant.Sign(tv.Value) > 0
}
