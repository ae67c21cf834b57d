package relock

import (
	"context"
	"embed"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every script is a file of its own under scripts/, whose header names its
// KEYS, ARGV and return values. Under each script's declaration stands its
// Go wrapper, a func ...Call that takes typed arguments and returns the
// scriptCall: the one place where the order of KEYS and ARGV is written, to
// be read beside the header. Call sites never spell KEYS or ARGV; they run
// the call (run), batch it (the watchdog) or pipeline it (runAcquire,
// evalPipeline). To add a script: declare it with newScript and write its
// ...Call below, as lockForceReleaseCall does.
//
// redis.Script runs EVALSHA and falls back to EVAL when the server does not
// know the script yet (NOSCRIPT), so the source crosses the network once per
// server; evalPipeline does the same for a pipeline of calls.

// A scriptCall is one run of a script: its KEYS and ARGV, in the order of its
// header.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// run runs the call on rdb (EVALSHA, then EVAL on NOSCRIPT).
func (sc scriptCall) run(ctx context.Context, rdb redis.Scripter) *redis.Cmd {
	return sc.script.Run(ctx, rdb, sc.keys, sc.args...)
}

//go:embed scripts/*.lua
var scriptFiles embed.FS

// newScript makes one script of the files scripts/<name>.lua, in order: the
// preludes a script uses (acquire_common, release_common, queue_common,
// listener_common, handover_common, fair_common, rw_common, renew_common;
// never run on their own), then the script itself.
func newScript(names ...string) *redis.Script {
	var src strings.Builder
	for _, name := range names {
		b, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
		if err != nil {
			panic("relock: " + err.Error()) // a name that is not embedded: caught by any test
		}
		src.Write(b)
	}
	return redis.NewScript(src.String())
}

// The Lock scripts that queue (see queue_common.lua) carry its helpers; those
// that free a hold also carry handover_common's (and listener_common's walk
// of the queue, which it uses), which use acquire_common's token and
// release_common's latch. A script carries only the helpers it
// may call: Redis creates every one of them again at each call.
var (
	lockAcquireScript = newScript("acquire_common", "queue_common", "lock_acquire")
	lockReleaseScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "lock_release")
	lockAbandonScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "lock_abandon")
	fairAcquireScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "fair_common", "fair_acquire")
	fairReleaseScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "fair_common", "fair_release")
)

// lockAcquireCall takes or re-enters the Lock whose keys are k for owner
// (request r); queue says a busy attempt queues the caller for a hand-over
// (RedLock's rounds do not: no single master can hand a RedLock over).
func lockAcquireCall(c *Client, k lockKeys, owner string, r acquireReq, queue bool) scriptCall {
	return scriptCall{lockAcquireScript, []string{k.hash, k.tail},
		[]any{owner, r.op, r.gen, c.leaseArg(r.lease), c.args.fencing, flagArg(queue)}}
}

// lockReleaseCall releases one hold of owner's (request r) on the Lock whose
// keys are k; a final release hands the lock over to its first queued waiter.
func lockReleaseCall(c *Client, k lockKeys, owner string, r releaseReq) scriptCall {
	return scriptCall{lockReleaseScript, []string{k.hash, k.channel, k.tail},
		[]any{owner, r.op, r.gen, flagArg(r.final), c.args.publish, c.args.latch, c.args.blind}}
}

// fairAcquireCall takes, re-enters or queues for (request r) the FairLock
// whose keys are k.
func fairAcquireCall(c *Client, k fairKeys, r acquireReq) scriptCall {
	return scriptCall{fairAcquireScript, []string{k.hash, k.queue, k.tail},
		[]any{r.owner, r.op, r.gen, r.lease.Milliseconds(), c.fencingArg(), boolArg(r.waiter),
			c.opts.waiterTimeout.Milliseconds(), c.publishCommand(), c.blindHandOverArg()}}
}

// fairReleaseCall releases one hold (request r) of the FairLock whose keys
// are k; a final release hands the lock over to the first queued waiter
// that listens.
func fairReleaseCall(c *Client, k fairKeys, r releaseReq) scriptCall {
	return scriptCall{fairReleaseScript, []string{k.hash, k.queue, k.channel, k.tail},
		[]any{r.owner, r.op, r.gen, boolArg(r.final), c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

// lockAbandonCall takes waiter (the op id its attempts sent) out of the
// queue of the Lock whose keys are k, releasing a grant handed to it.
func lockAbandonCall(c *Client, k lockKeys, owner, waiter string) scriptCall {
	return scriptCall{lockAbandonScript, []string{k.hash, k.channel, k.tail},
		[]any{owner, waiter, c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

var lockForceReleaseScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "lock_force_release")

// lockForceReleaseCall frees the Lock whose keys are k, whoever holds it,
// handing it over to its first queued waiter. It replies with the
// generation it removed ({} : not held).
func lockForceReleaseCall(c *Client, k lockKeys) scriptCall {
	return scriptCall{lockForceReleaseScript, []string{k.hash, k.channel, k.tail},
		[]any{c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

var lockRenewScript = newScript("renew_common", "lock_renew")

// lockRenewCall renews generation gen of the exclusive hold whose hash is
// hash to lease (0: only checks it). It is one item of a batch: calls of it
// concatenate (see watchdog.renew); the reply has one 1 (held) or 0 (gone)
// per item.
func lockRenewCall(hash, gen string, lease time.Duration) scriptCall {
	return scriptCall{lockRenewScript, []string{hash}, []any{gen, lease.Milliseconds()}}
}

var multiAcquireScript = newScript("acquire_common", "multi_acquire")

// multiAcquireCall takes or re-enters the Locks ks of one Client (and slot)
// for owner at once, held[i] being the generation owner holds on ks[i] (""
// for none).
func multiAcquireCall(c *Client, ks []lockKeys, held []string, owner, op string, lease time.Duration) scriptCall {
	keys := make([]string, 0, 2*len(ks))
	args := append(make([]any, 0, 4+len(ks)), owner, op, lease.Milliseconds(), c.fencingArg())
	for i, k := range ks {
		keys = append(keys, k.hash, k.tail)
		args = append(args, held[i])
	}
	return scriptCall{multiAcquireScript, keys, args}
}

var multiReleaseScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "multi_release")

// multiReleaseCall releases one hold of owner's on each of the Locks ks of
// one Client (and slot): generation gens[i], the last one when final[i].
func multiReleaseCall(c *Client, ks []lockKeys, gens []string, final []bool, owner, op string) scriptCall {
	keys := make([]string, 0, 3*len(ks))
	args := append(make([]any, 0, 5+2*len(ks)), owner, op, c.publishCommand(), c.latchArg(), c.blindHandOverArg())
	for i, k := range ks {
		keys = append(keys, k.hash, k.channel, k.tail)
		args = append(args, gens[i], boolArg(final[i]))
	}
	return scriptCall{multiReleaseScript, keys, args}
}

var redFenceScript = newScript("red_fence")

// redFenceCall raises the token of generation gen on one RedLock master to
// token: 1 done, 0 the hold is gone there.
func redFenceCall(hash, gen string, token int64) scriptCall {
	return scriptCall{redFenceScript, []string{hash}, []any{gen, token}}
}

var fairAbandonScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "fair_common", "fair_abandon")

// fairAbandonCall takes waiter (the op id its attempts sent) out of the
// FairLock's queue, releasing a grant handed to it.
func fairAbandonCall(c *Client, k fairKeys, owner, waiter string) scriptCall {
	return scriptCall{fairAbandonScript, []string{k.hash, k.queue, k.channel, k.tail},
		[]any{owner, waiter, c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

var fairForceReleaseScript = newScript("acquire_common", "release_common", "queue_common", "listener_common", "handover_common", "fair_common", "fair_force_release")

// fairForceReleaseCall frees the FairLock whoever holds it and wakes the next
// waiter. It replies with the generation it removed ({} : not held).
func fairForceReleaseCall(c *Client, k fairKeys) scriptCall {
	return scriptCall{fairForceReleaseScript, []string{k.hash, k.queue, k.channel, k.tail},
		[]any{c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

// newRWScript makes an RWLock script: every one carries acquire_common
// (tokens), release_common (latches), queue_common (the queue's entries)
// and listener_common (the walk of the queue for a Client that listens)
// before rw_common, whose hand-over of the write hold uses them, then names.
// rw_renew and rw_state never hand over, but carry them all the same, so
// that every name in rw_common resolves.
func newRWScript(names ...string) *redis.Script {
	return newScript(append([]string{"acquire_common", "release_common", "queue_common", "listener_common", "rw_common"}, names...)...)
}

var rwReadAcquireScript = newRWScript("rw_read_acquire")

// rwReadAcquireCall takes or re-enters a read hold.
func rwReadAcquireCall(c *Client, k rwKeys, r acquireReq) scriptCall {
	return scriptCall{rwReadAcquireScript, []string{k.hash, k.tail, k.readCh},
		[]any{r.owner, r.op, r.gen, r.lease.Milliseconds(), c.publishCommand(), c.blindHandOverArg()}}
}

var rwWriteAcquireScript = newRWScript("rw_write_acquire")

// rwWriteAcquireCall takes or re-enters the write hold, or queues the
// writer (r.waiter) for a hand-over. reading says the Client holds, or is
// taking, a read hold of r.owner: without it, a read hold of the owner in
// Redis that this Client made is a leftover, which the write acquire takes
// over.
func rwWriteAcquireCall(c *Client, k rwKeys, r acquireReq, reading bool) scriptCall {
	leftover := ""
	if !reading {
		leftover = c.id + ":" // the prefix of the generations it makes (newOp)
	}
	return scriptCall{rwWriteAcquireScript, []string{k.hash, k.tail, k.readCh},
		[]any{r.owner, r.op, r.gen, r.lease.Milliseconds(), c.fencingArg(), c.opts.waiterTimeout.Milliseconds(),
			boolArg(r.waiter), c.publishCommand(), c.blindHandOverArg(), leftover}}
}

var rwReleaseScript = newRWScript("rw_release")

// rwReleaseCall releases one hold of the given kind ("r" or "w"); the
// release that frees the lock hands it over to the first queued writer.
func rwReleaseCall(c *Client, k rwKeys, kind string, r releaseReq) scriptCall {
	return scriptCall{rwReleaseScript, []string{k.hash, k.readCh, k.tail},
		[]any{r.owner, r.op, r.gen, kind, boolArg(r.final), c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

var rwRenewScript = newRWScript("renew_common", "rw_renew")

// rwRenewCall renews (lease 0: checks) generation gen of owner's hold of the
// given kind: one item of a batch, as lockRenewCall.
func rwRenewCall(hash, kind, owner, gen string, lease time.Duration) scriptCall {
	return scriptCall{rwRenewScript, []string{hash},
		[]any{kind + "g:" + owner, kind + "d:" + owner, gen, lease.Milliseconds()}}
}

var rwAbandonScript = newRWScript("rw_abandon")

// rwAbandonCall takes waiter (the op id its attempts sent) out of the
// writers' queue, releasing a write hold handed to it.
func rwAbandonCall(c *Client, k rwKeys, owner, waiter string) scriptCall {
	return scriptCall{rwAbandonScript, []string{k.hash, k.readCh, k.tail},
		[]any{owner, waiter, c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

var rwForceReleaseScript = newRWScript("rw_force_release")

// rwForceReleaseCall removes every hold of the given kind, whoever has it,
// handing a lock that ends up free to the first queued writer. It replies
// with the generations it removed ({} : none).
func rwForceReleaseCall(c *Client, k rwKeys, kind string) scriptCall {
	return scriptCall{rwForceReleaseScript, []string{k.hash, k.readCh, k.tail},
		[]any{kind, c.publishCommand(), c.latchArg(), c.blindHandOverArg()}}
}

var rwStateScript = newRWScript("rw_state")

// rwStateCall reads {readers, writer, owner's reads, owner's writes} (owner
// "" for none).
func rwStateCall(hash, owner string) scriptCall {
	return scriptCall{rwStateScript, []string{hash}, []any{owner}}
}

var inspectScript = newScript("inspect")

// inspectCall reads, without writing, every kind of lock of one name (see
// parseInspect).
func inspectCall(ks keyspace) scriptCall {
	return scriptCall{inspectScript, []string{ks.key(""), ks.key("fair"), ks.key("fair:q"), ks.key("rw"), ks.key("sema")}, nil}
}
