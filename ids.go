package relock

import (
	"context"
	"strconv"
	"unsafe"
)

// The ids a Lock+Unlock writes to Redis — the owner, the op id of each
// request, the generation — cost allocations twice: once to make the string,
// and once more at every script call that sends it, because boxing a string
// into the call's []any copies its header to the heap. This file makes each
// id once, in memory that never changes afterwards, and sends it as a
// pointer to that memory (a *textArg), which boxes for free: 7 allocations
// fewer per uncontended Lock+Unlock.

// A textArg is a string sent to a script by pointer (see strArg). go-redis
// writes an argument that is an encoding.BinaryMarshaler as its bytes, and
// prints one (in cmd.String(), which tracing hooks log) with fmt, which
// calls String: so it reaches Redis, and logs, as the string itself.
type textArg string

// MarshalBinary returns the string's bytes without copying them: go-redis
// only writes them to its buffer.
func (t *textArg) MarshalBinary() ([]byte, error) {
	return unsafe.Slice(unsafe.StringData(string(*t)), len(*t)), nil
}

func (t *textArg) String() string { return string(*t) }

// strArg is s as a script argument. When ref points at s itself — the same
// bytes, kept where nothing changes them while the call is made (a hold's
// key, an entry's generation, an op id made by newOpRef) — it is sent
// instead, as a textArg: a pointer boxes without an allocation. Any other
// ref (nil, or a string that is not s) is ignored and s is boxed, so a
// stale ref can never send another value.
func strArg(s string, ref *string) any {
	if ref != nil && len(*ref) == len(s) && unsafe.StringData(*ref) == unsafe.StringData(s) {
		return (*textArg)(ref)
	}
	return s
}

// argRefs point at a request's owner, op and gen where they are kept (see
// strArg); any of them may be nil.
type argRefs struct{ owner, op, gen *string }

// opIDCap is the room of an opID: a Client id (22 characters, see
// newClientID), ':' and a uint64 in decimal.
const opIDCap = 22 + 1 + 20

// An opID is an op id and its bytes in one allocation: s is a view of
// b[:len(s)], written once by newOpRef and never again, so &s is a stable
// argument (see strArg) and the id costs one allocation, not two.
type opID struct {
	s string
	b [opIDCap]byte
}

// newOpRef returns a new op id (see newOp), kept where strArg can send it
// without boxing it.
func (c *Client) newOpRef() *string {
	seq := c.reqSeq.Add(1)
	if len(c.id) > opIDCap-21 { // not an id of newClientID's (a test's)
		s := c.id + ":" + strconv.FormatUint(seq, 10)
		return &s
	}
	o := new(opID)
	n := copy(o.b[:], c.id)
	o.b[n] = ':'
	n = len(strconv.AppendUint(o.b[:n+1], seq, 10))
	o.s = unsafe.String(&o.b[0], n)
	return &o.s
}

// newOp returns an id unique to one request of this Client: it names a
// request, or a hold generation, in Redis. One allocation.
func (c *Client) newOp() string { return *c.newOpRef() }

// An ownerCtx is a context that carries an owner: the context, the owner
// and the bytes of its field in one allocation (context.WithValue would box
// the owner in a second one, and the field is a third). It answers ownerKey
// with o and every other key as its parent.
type ownerCtx struct {
	context.Context
	o owner
	// field holds o.text's bytes for an owner made for a Client (see
	// withNewOwnerOf): written once, before o.text is made a view of them,
	// and never again.
	field [opIDCap]byte
}

func (c *ownerCtx) Value(key any) any {
	if _, ok := key.(ownerKey); ok {
		return &c.o
	}
	return c.Context.Value(key)
}

func (c *ownerCtx) String() string { return "relock.ownerCtx(" + c.o.id() + ")" }

// withOwner returns ctx carrying o, and the owner as the context keeps it.
func withOwner(ctx context.Context, o owner) (context.Context, *owner) {
	oc := &ownerCtx{Context: ctx, o: o}
	return oc, &oc.o
}

// withNewOwnerOf returns ctx carrying a new owner made for Client c (see
// owner.home), and the owner. Its field on c, "<c.id>:<n>", lives in the
// context's own bytes, its id being the "<n>": one allocation in all.
func withNewOwnerOf(ctx context.Context, c *Client) (context.Context, *owner) {
	seq := ownerSeq.Add(1)
	if len(c.id) > opIDCap-21 { // not an id of newClientID's (a test's)
		field := c.id + ":" + strconv.FormatUint(seq, 10)
		return withOwner(ctx, owner{text: field, home: c})
	}
	oc := &ownerCtx{Context: ctx}
	n := copy(oc.field[:], c.id)
	oc.field[n] = ':'
	n = len(strconv.AppendUint(oc.field[:n+1], seq, 10))
	field := unsafe.String(&oc.field[0], n)
	oc.o = owner{text: field, home: c}
	return oc, &oc.o
}
