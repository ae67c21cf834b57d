package holdctx

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
)

// ---- check 5: b.Unlock(hold of a) ----

// reportCrossUnlock reports the Unlock call c of lock b when its argument
// v is a hold of another lock a taken in the function (or derived from
// one), and the function also takes b with a hold that v does not derive
// from: b.Unlock(actx) does not release b's hold. It stays quiet when the
// function does not take b itself (the caller's context may hold b) and
// when v derives from a hold of b (bctx, _ := b.Lock(ctx); actx, _ :=
// a.Lock(bctx) makes actx carry b's hold too). It reports whether it
// reported.
func reportCrossUnlock(pass *analysis.Pass, c call, id *ast.Ident, v *types.Var, holds map[string][]*hold) bool {
	own := holds[c.key]
	if len(own) == 0 {
		return false
	}
	for _, h := range own {
		if h.derived[v] {
			return false
		}
	}
	var other *hold
	for key, hs := range holds {
		if key == c.key {
			continue
		}
		for _, h := range hs {
			if h.derived[v] && betterMatch(h, other, v) {
				other = h
			}
		}
	}
	if other == nil {
		return false
	}
	for _, h := range own {
		h.reported = true // the caller meant to release it: one report is enough
	}
	b, a := types.ExprString(c.recv), types.ExprString(other.acq.recv)
	pass.Report(analysis.Diagnostic{
		Pos: c.call.Pos(),
		End: c.call.End(),
		Message: b + "." + namesOf(c.call).release + " is given " + id.Name + ", a hold context of " + a + " (from " + a + "." + methodName(other.acq.call) +
			"), not of " + b + ": it does not release " + b + "'s hold; pass " + b + "'s own hold context (" +
			own[0].v.Name() + ") to " + b + "." + namesOf(c.call).release,
	})
	return true
}

// betterMatch prefers the hold kept in v itself, then the one taken last
// (the innermost of nested holds).
func betterMatch(h, cur *hold, v *types.Var) bool {
	switch {
	case cur == nil:
		return true
	case (h.v == v) != (cur.v == v):
		return h.v == v
	}
	return h.acq.call.Pos() > cur.acq.call.Pos()
}
