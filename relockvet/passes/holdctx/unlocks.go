package holdctx

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/inspector"
)

// ---- check 2: Unlock given another context than the hold ----

// hold is one hold of a lock kept in a local variable, with the variables
// derived from it in the function.
type hold struct {
	acq      call                // the Lock/TryLock that took it
	v        *types.Var          // where it is kept
	errVar   *types.Var          // the acquisition's error, nil if not kept
	derived  map[*types.Var]bool // v and the variables assigned from it
	escaped  bool                // handed somewhere not followed (field, return, channel...)
	released bool                // given to an Unlock of its lock here
	reported bool                // an Unlock of its lock given another context was reported
}

// done: the function releases the hold or lets it go where it is not
// followed.
func (h *hold) done() bool { return h.escaped || h.released }

// checkUnlocks reports, for the holds a function keeps in local variables:
// an Unlock given a hold of another lock (check 5); an Unlock of lock k
// given a variable that is not a hold of k (nor derived from one), when the
// function neither releases its hold of k nor lets it go elsewhere
// (return, channel send, field, composite literal, &v) — the second
// condition keeps check 2 quiet for holds handed between goroutines and for
// re-entries released in turn (inner, outer); and a hold that a path of the
// function returns without releasing (check 6).
func checkUnlocks(pass *analysis.Pass, fn inspector.Cursor, calls []call, x *callees) {
	info := pass.TypesInfo
	holds, unsure := collectHolds(info, calls)
	if len(holds) == 0 {
		return
	}
	assigns := collectAssigns(fn)
	for _, hs := range holds {
		for _, h := range hs {
			deriveHold(info, fn, assigns, h)
		}
	}
	// Which holds does this function release?
	for _, c := range calls {
		if c.kind != release || len(c.call.Args) != 1 {
			continue
		}
		for _, h := range holds[c.key] {
			if mentions(info, c.call.Args[0], h.derived) {
				h.released = true
			}
		}
	}
	for _, c := range calls {
		if c.kind == release && c.key != "" && len(c.call.Args) == 1 {
			checkUnlock(pass, fn, c, holds, unsure)
		}
	}
	all := map[*types.Var]bool{} // every hold of the function, derived ones too
	for _, hs := range holds {
		for _, h := range hs {
			checkLeak(pass, h, x)
			for v := range h.derived {
				all[v] = true
			}
		}
	}
	for _, hs := range holds {
		for _, h := range hs {
			if s, ok := lockScope(info, h, assigns); ok {
				checkParentUses(pass, s, all)
			}
		}
	}
}

// collectHolds gathers the holds of each lock kept in local variables, and
// the locks whose holds go where they are not followed (s.hold, err =
// l.Lock(ctx); return l.Lock(ctx); ...).
func collectHolds(info *types.Info, calls []call) (holds map[string][]*hold, unsure map[string]bool) {
	holds, unsure = map[string][]*hold{}, map[string]bool{}
	for _, c := range calls {
		if c.kind != acquire || c.key == "" {
			continue
		}
		dst, discarded := holdDest(c.cur)
		if discarded {
			continue // check 1
		}
		v := localVar(info, dst)
		if v == nil {
			unsure[c.key] = true
			continue
		}
		h := &hold{acq: c, v: v, errVar: errDest(info, c.cur), derived: map[*types.Var]bool{v: true}}
		holds[c.key] = append(holds[c.key], h)
	}
	return holds, unsure
}

// deriveHold closes h over derivation: a local variable assigned from an
// expression that mentions it (context.WithTimeout(hctx, d), c := hctx) is
// derived from it, unless its type cannot hold it (an error, a number...)
// and the value assigned is not the hold itself. A hold stored anywhere
// else has escaped.
func deriveHold(info *types.Info, fn inspector.Cursor, assigns []assign, h *hold) {
	for changed := true; changed; {
		changed = false
		for _, a := range assigns {
			if !mentions(info, a.rhs, h.derived) {
				continue
			}
			for _, l := range a.lhs {
				if isBlank(l) {
					continue
				}
				v := localVar(info, l)
				if v != nil && cannotHold(v.Type()) && !flows(info, a.rhs, h.derived) {
					continue // err := validate(hctx): a value computed from the hold, not the hold
				}
				if v == nil || v.Pkg() == nil || v.Parent() == v.Pkg().Scope() {
					if flows(info, a.rhs, h.derived) {
						h.escaped = true // s.hold = hctx, holds[i] = hctx, ...
					}
					continue
				}
				if !h.derived[v] {
					h.derived[v] = true
					changed = true
				}
			}
		}
	}
	if escapes(info, fn, h.derived) {
		h.escaped = true
	}
}

// checkUnlock checks one Unlock call c: check 5 (a hold of another lock),
// then check 2 (another context while the function's hold stays open).
func checkUnlock(pass *analysis.Pass, fn inspector.Cursor, c call, holds map[string][]*hold, unsure map[string]bool) {
	info := pass.TypesInfo
	id, ok := ast.Unparen(c.call.Args[0]).(*ast.Ident)
	if !ok {
		return
	}
	v, ok := info.Uses[id].(*types.Var)
	if !ok || isFuncLitParam(fn, v) {
		return
	}
	if reportCrossUnlock(pass, c, id, v, holds) || unsure[c.key] {
		return
	}
	var open *hold // a hold of this lock the function neither releases nor hands on
	for _, h := range holds[c.key] {
		if h.derived[v] {
			return
		}
		if !h.done() && open == nil {
			open = h
		}
	}
	if open == nil {
		return
	}
	open.reported = true
	l, h, n := types.ExprString(c.recv), open.v.Name(), namesOf(c.call)
	pass.Report(analysis.Diagnostic{
		Pos: c.call.Pos(),
		End: c.call.End(),
		Message: l + "." + n.release + " is given " + id.Name + ", not the hold context " + h + " that " + l +
			"." + n.acquire + " returned here (" + h + " is never released); pass " + h + " (or a context derived from it) to " +
			l + "." + n.release + ", or use " + l + "." + n.do,
	})
}
