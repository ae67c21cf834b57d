package relock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// The funnel: every request a Client makes to Redis for its locks goes
// through one of
//
//   - eval: a script call (scriptCall), coalesced with the calls the
//     Client's other goroutines make at the same time (coalesce.go);
//   - evalReplicated: the same followed by WithReplicas's WAIT (replicas.go);
//   - evalPipeline: several script calls in one pipeline (the watchdog's
//     renewals, Client.Inspect of many names);
//   - request: any other command (PTTL, EXISTS, HGET, DEL, SCAN, ...).
//
// Each of them, and nothing at the call site, does the three things every
// Redis call needs: run it, react to a fault it reports (noteFault: a
// network error or a restarted server makes the Client check its holds and,
// on a Cluster, reload the slot map) and wrap its error so that it names what
// failed and stays errors.Is/As-able (wrapRedis). A call site therefore never
// calls noteFault or wrapRedis on what these return. The subscriber's
// connections (pubsub_conn.go) are not requests: their faults are noted
// where a connection breaks.
//
// Bounding a call by the caller's deadline stays the caller's (bounded.go):
// it decides whether to wait, the funnel only runs the call.

// A result is the reply of one script call run through the funnel. Its
// accessors return the reply's value or its error, wrapped as the
// failure of what (see wrapRedis); the fault has been noted already.
type result struct {
	cmd  *redis.Cmd
	what string
}

func (r result) Err() error { return wrapRedis(r.what, r.cmd.Err()) }

func (r result) Int64() (int64, error) {
	v, err := r.cmd.Int64()
	return v, wrapRedis(r.what, err)
}

func (r result) Int64Slice() ([]int64, error) {
	v, err := r.cmd.Int64Slice()
	return v, wrapRedis(r.what, err)
}

// appendInt64s is Int64Slice appending to buf, which a caller keeps on its
// stack: go-redis's Int64Slice allocates the slice at every reply.
func (r result) appendInt64s(buf []int64) ([]int64, error) {
	v, err := r.cmd.Slice()
	if err != nil {
		return nil, wrapRedis(r.what, err)
	}
	for _, x := range v {
		n, ok := x.(int64)
		if !ok { // not a script's integer reply: go-redis converts it, or says why not
			return r.Int64Slice()
		}
		buf = append(buf, n)
	}
	return buf, nil
}

func (r result) StringSlice() ([]string, error) {
	v, err := r.cmd.StringSlice()
	return v, wrapRedis(r.what, err)
}

func (r result) Slice() ([]any, error) {
	v, err := r.cmd.Slice()
	return v, wrapRedis(r.what, err)
}

// eval runs sc, what naming it in errors. A call whose context can end runs
// alone: in a batch, its cancellation would fail the calls sent with it.
// Every other call is coalesced (see coalescer), and so is a call whose
// context ends only at its deadline (a deadlineCtx), which the coalescer
// respects.
func (c *Client) eval(ctx context.Context, what string, sc scriptCall) result {
	if err := c.ready(ctx, sc.firstKey()); err != nil {
		return result{failedCmd(ctx, err), what}
	}
	var cmd *redis.Cmd
	if _, bounded := ctx.(*deadlineCtx); bounded || ctx.Done() == nil {
		cmd = c.coalesce.run(ctx, c.rdbFor(ctx), sc)
	} else {
		cmd = sc.run(ctx, c.rdbFor(ctx))
	}
	c.noteFault(cmd.Err())
	return result{cmd, what}
}

// run runs the call on rdb by EVALSHA; on NOSCRIPT it loads the script
// (loadScript) and sends EVALSHA again, or sends EVAL where the script
// could not be loaded so. (It sends the first EVALSHA itself, not through
// evalSha: a Lock reaches Redis one call less deep.)
func (sc scriptCall) run(ctx context.Context, rdb redis.UniversalClient) *redis.Cmd {
	cmd := sc.evalShaCmd(ctx)
	_ = rdb.Process(ctx, cmd) // the error is the command's
	if noScript(cmd.Err()) && loadScript(ctx, rdb, sc.script) {
		cmd = sc.evalSha(ctx, rdb)
	}
	if noScript(cmd.Err()) {
		return sc.script.Eval(ctx, rdb, sc.keys, sc.args...)
	}
	return cmd
}

// evalReplicated is eval for a call that writes a grant: with WithReplicas,
// it pipelines a WAIT after the script, and repl is then non-nil when the
// script's writes did not reach the replicas (a WAIT after an attempt that
// wrote nothing returns at once). Without WithReplicas it is eval.
func (c *Client) evalReplicated(ctx context.Context, what string, sc scriptCall) (r result, repl error) {
	if c.opts.replicas == 0 {
		return c.eval(ctx, what, sc), nil
	}
	if err := c.ready(ctx, sc.firstKey()); err != nil {
		return result{failedCmd(ctx, err), what}, nil
	}
	target, err := c.waitTarget(ctx, sc.keys[0])
	if err != nil {
		c.noteFault(err)
		return result{failedCmd(ctx, err), what}, nil
	}
	var wait *redis.IntCmd
	cmds, _ := evalPipeline(ctx, target, []scriptCall{sc}, func(pipe redis.Pipeliner) { wait = c.queueWait(ctx, pipe) })
	c.noteFault(cmds[0].Err())
	if cmds[0].Err() != nil {
		return result{cmds[0], what}, nil
	}
	return result{cmds[0], what}, c.replicated(wait)
}

// failedCmd is a reply that carries err: a call that could not be sent.
func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// runAcquire runs an acquire script's call (see evalReplicated) and reads
// its reply with parseAcquire (channel: where a waiter is handed the lock).
// refused, when not nil, reads a reply of two values first: the error of a
// request the script refused, or nil for any other reply. (It gets the
// values, not the slice, so that the reply stays on the stack.)
func (c *Client) runAcquire(ctx context.Context, sc scriptCall, channel string, refused func(status, value int64) error) (attempt, error) {
	var buf [4]int64 // the reply, on the stack
	var r result
	var repl error
	if c.opts.replicas == 0 {
		r = c.eval(ctx, "acquire", sc)
	} else {
		r, repl = c.evalReplicated(ctx, "acquire", sc)
	}
	res, err := r.appendInt64s(buf[:0])
	if err != nil {
		return attempt{}, err
	}
	if refused != nil && len(res) == 2 {
		if err := refused(res[0], res[1]); err != nil {
			return attempt{}, err
		}
	}
	a, err := parseAcquire(res, channel)
	if a.outcome == acquired {
		a.replication = repl
	}
	return a, err
}

// runRelease runs a release script's call and reads its reply with
// parseRelease.
func (c *Client) runRelease(ctx context.Context, sc scriptCall) (releaseOutcome, error) {
	n, err := c.eval(ctx, "release", sc).Int64()
	if err != nil {
		return 0, err
	}
	return parseRelease(n)
}

// evalPipeline runs calls in one pipeline (see sendPipeline) on the
// Client's Redis, what naming them in errors, and returns each call's reply
// and how many pipelines it sent.
func (c *Client) evalPipeline(ctx context.Context, what string, calls []scriptCall) ([]result, int) {
	out := make([]result, len(calls))
	var key string
	if len(calls) > 0 {
		key = calls[0].firstKey()
	}
	if err := c.ready(ctx, key); err != nil {
		for i := range out {
			out[i] = result{failedCmd(ctx, err), what}
		}
		return out, 0
	}
	cmds, sent := evalPipeline(ctx, c.rdbFor(ctx), calls, nil)
	for i, cmd := range cmds {
		c.noteFault(cmd.Err())
		out[i] = result{cmd, what}
	}
	return out, sent
}

// request is the funnel for any other command of c's: do returns its reply
// (a go-redis command's Result method, e.g. c.rdb.PTTL(ctx, key).Result),
// what names it in errors.
func request[T any](c *Client, what string, do func() (T, error)) (T, error) {
	v, err := do()
	return v, c.noted(what, err)
}

// noted is the funnel's reaction to err, the error of a Redis call named
// what that request does not fit (one with no reply value, or a go-redis
// helper that returns two): the fault is noted and the error wrapped.
func (c *Client) noted(what string, err error) error {
	c.noteFault(err)
	return wrapRedis(what, err)
}

// evalPipeline sends calls in one pipeline on target by EVALSHA, then
// loads the scripts the server did not know yet (NOSCRIPT) and sends those
// calls again in a second pipeline, by EVALSHA (by EVAL where a script
// could not be loaded; see loadScript): a script's source crosses the
// network once per server. after,
// when set, adds commands at the end of each pipeline sent (WithReplicas's
// WAIT). It returns each call's reply, in order, and how many pipelines it
// sent.
func evalPipeline(ctx context.Context, target redis.Cmdable, calls []scriptCall, after func(redis.Pipeliner)) ([]*redis.Cmd, int) {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds, 0
	}
	send := func(eval bool, todo []int) {
		pipe := target.Pipeline()
		for _, i := range todo {
			sc := calls[i]
			if eval {
				cmds[i] = sc.script.Eval(ctx, pipe, sc.keys, sc.args...)
			} else {
				cmds[i] = sc.evalSha(ctx, pipe)
			}
		}
		if after != nil {
			after(pipe)
		}
		// Errors are read per command. go-redis (v9.17.3, at least) leaves the
		// commands of a pipeline that never got a connection (the pool's
		// wait timed out) without a reply or an error: they get Exec's.
		if _, err := pipe.Exec(ctx); err != nil {
			for _, i := range todo {
				if cmds[i].Err() == nil && cmds[i].Val() == nil {
					cmds[i].SetErr(err)
				}
			}
		}
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	send(false, all)
	var missing []int
	for i, cmd := range cmds {
		if noScript(cmd.Err()) {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return cmds, 1
	}
	loaded := loadScripts(ctx, target, calls, missing)
	send(!loaded, missing)
	if !loaded {
		return cmds, 2
	}
	var again []int // flushed between the load and the call
	for _, i := range missing {
		if noScript(cmds[i].Err()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds, 2
	}
	send(true, again)
	return cmds, 3
}

// loadScripts loads the scripts of the calls todo on target (loadScript),
// each once, and reports whether all were.
func loadScripts(ctx context.Context, target redis.Cmdable, calls []scriptCall, todo []int) bool {
	done := make(map[*redis.Script]bool, len(todo))
	for _, i := range todo {
		script := calls[i].script
		if done[script] {
			continue
		}
		if !loadScript(ctx, target, script) {
			return false
		}
		done[script] = true
	}
	return true
}
