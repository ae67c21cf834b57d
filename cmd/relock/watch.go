package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// settle is how long after a message watch looks again: a release is often
// followed at once by a waiter's acquire, which publishes nothing.
const settle = 250 * time.Millisecond

// globEscaper makes a string match itself in a Redis glob pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// jsonEvent is one line of watch --json.
type jsonEvent struct {
	Time    time.Time  `json:"time"`
	Event   string     `json:"event"` // "start", "message" or "change"
	Channel string     `json:"channel,omitempty"`
	Message string     `json:"message,omitempty"`
	State   *jsonState `json:"state,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// watcher follows the pub/sub channels of one lock name.
type watcher struct {
	cl      *cli
	name    string
	chans   relock.LockChannels
	classic *redis.PubSub // SUBSCRIBE: PUBLISH (one server, or a Cluster without sharded pub/sub)
	pattern *redis.PubSub // PSUBSCRIBE on the FairLock waiters' channels, nil where refused
	sharded *redis.PubSub // SSUBSCRIBE on a Cluster: SPUBLISH, relock's default there
	// fairSubs are the waiters' channels subscribed one by one: on the
	// sharded connection (sharded pub/sub has no patterns) and, where the
	// server refused the pattern (an ACL), on the classic one.
	fairSubs map[string]bool
	msgs     chan *redis.Message
	last     string // fingerprint of the last state printed
}

// watch prints the lock's state, then again whenever a message arrives on
// one of its channels (a release) and whenever a slow re-read finds it
// changed (an acquire, or a lease that ran out, publishes nothing). It ends
// on SIGINT (ctx) or after --for.
func (cl *cli) watch(ctx context.Context, name string) int {
	chans, err := cl.c.Channels(name)
	if err != nil {
		return cl.fail("watch", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cl.forDur > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, cl.forDur)
		defer c2()
	}
	w := &watcher{cl: cl, name: name, chans: chans, fairSubs: map[string]bool{}, msgs: make(chan *redis.Message)}
	defer w.close()
	if err := w.subscribe(ctx); err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		return cl.fail("subscribe", err)
	}

	if !cl.json {
		fmt.Fprintf(cl.stdout, "-- %s watching %s on %s (Ctrl-C stops)\n", stamp(time.Now()), name, cl.target.display)
	}
	w.show(ctx, jsonEvent{Event: "start"}, true)

	ticker := time.NewTicker(cl.refresh)
	defer ticker.Stop()
	again := time.NewTimer(time.Hour)
	again.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case m := <-w.msgs:
			w.show(ctx, jsonEvent{Event: "message", Channel: m.Channel, Message: m.Payload}, true)
			again.Reset(settle)
		case <-again.C:
			w.show(ctx, jsonEvent{Event: "change"}, false)
		case <-ticker.C:
			w.show(ctx, jsonEvent{Event: "change"}, false)
		}
	}
}

// subscribe listens on every channel of the name and waits until the server
// confirmed, so that no release after the first print can be missed.
func (w *watcher) subscribe(ctx context.Context) error {
	rdb := w.cl.rdb
	exact := []string{w.chans.Lock, w.chans.RWRead, w.chans.RWWrite}
	w.classic = rdb.Subscribe(ctx, exact...)
	if err := confirm(ctx, w.classic, len(exact)); err != nil {
		return err
	}
	go w.forward(ctx, w.classic)
	// A FairLock wakes its next waiter on that waiter's own channel. A
	// least-privilege ACL refuses the pattern: then each waiter's channel
	// is subscribed as it shows up (see follow).
	// A Lock hands itself over on the waiting Client's channel.
	w.pattern = rdb.PSubscribe(ctx, globEscaper.Replace(w.chans.FairPrefix)+"*", globEscaper.Replace(w.chans.LockHandOverPrefix)+"*")
	if err := confirm(ctx, w.pattern, 2); err != nil {
		if ctx.Err() != nil {
			return err
		}
		_ = w.pattern.Close()
		w.pattern = nil
	} else {
		go w.forward(ctx, w.pattern)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		w.sharded = cc.SSubscribe(ctx, exact...)
		if err := confirm(ctx, w.sharded, len(exact)); err != nil {
			return err
		}
		go w.forward(ctx, w.sharded)
	}
	return nil
}

// confirm waits for n subscription confirmations.
func confirm(ctx context.Context, ps *redis.PubSub, n int) error {
	for n > 0 {
		v, err := ps.Receive(ctx)
		if err != nil {
			return err
		}
		if _, ok := v.(*redis.Subscription); ok {
			n--
		}
	}
	return nil
}

func (w *watcher) forward(ctx context.Context, ps *redis.PubSub) {
	for m := range ps.Channel() {
		select {
		case w.msgs <- m:
		case <-ctx.Done():
			return
		}
	}
}

func (w *watcher) close() {
	for _, ps := range []*redis.PubSub{w.classic, w.pattern, w.sharded} {
		if ps != nil {
			_ = ps.Close()
		}
	}
}

// follow keeps the one-by-one subscriptions on the channels of the
// FairLock's current waiters.
func (w *watcher) follow(ctx context.Context, st *relock.LockState) {
	if w.sharded == nil && w.pattern != nil {
		return // the pattern covers them
	}
	want := map[string]bool{}
	if st.FairLock != nil {
		for _, wt := range st.FairLock.Waiters {
			want[w.chans.FairPrefix+wt.Owner] = true
		}
	}
	var add, drop []string
	for ch := range want {
		if !w.fairSubs[ch] {
			add = append(add, ch)
		}
	}
	for ch := range w.fairSubs {
		if !want[ch] {
			drop = append(drop, ch)
		}
	}
	if len(add) == 0 && len(drop) == 0 {
		return
	}
	if w.sharded != nil {
		if len(add) > 0 {
			if err := w.sharded.SSubscribe(ctx, add...); err != nil {
				fmt.Fprintf(w.cl.stderr, "relock: subscribe: %v\n", err)
				return
			}
		}
		if len(drop) > 0 {
			_ = w.sharded.SUnsubscribe(ctx, drop...)
		}
	}
	if w.pattern == nil {
		if len(add) > 0 {
			if err := w.classic.Subscribe(ctx, add...); err != nil {
				fmt.Fprintf(w.cl.stderr, "relock: subscribe: %v\n", err)
				return
			}
		}
		if len(drop) > 0 {
			_ = w.classic.Unsubscribe(ctx, drop...)
		}
	}
	w.fairSubs = want
}

// show reads the state and prints it with the event that led to it; unless
// always, only when it differs from the last state printed (leases aside).
func (w *watcher) show(ctx context.Context, ev jsonEvent, always bool) {
	now := time.Now()
	st, err := w.cl.c.Inspect(ctx, w.name)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if w.cl.json {
			ev.Error = err.Error()
			ev.Time = now.UTC()
			_ = writeJSON(w.cl.stdout, ev)
		} else {
			fmt.Fprintf(w.cl.stderr, "relock: inspect: %v\n", err)
		}
		return
	}
	w.follow(ctx, st)
	if st.Lock != nil {
		w.listen(ctx)
	}
	fp := fingerprint(st)
	if !always && fp == w.last {
		return
	}
	w.last = fp
	if w.cl.json {
		ev.Time = now.UTC()
		ev.State = toJSON(st)
		_ = writeJSON(w.cl.stdout, ev)
		return
	}
	switch ev.Event {
	case "message":
		fmt.Fprintf(w.cl.stdout, "-- %s message %q on %s\n", stamp(now), ev.Message, ev.Channel)
	case "change":
		fmt.Fprintf(w.cl.stdout, "-- %s changed\n", stamp(now))
	}
	printState(w.cl.stdout, st)
}

// listenScript marks a held Lock as listened to on its channel (field ~m,
// as a waiting MultiLock does): relock publishes a release only when someone
// waits or listens. It never creates the hash: a free lock stays free.
var listenScript = redis.NewScript(`if redis.call('exists', KEYS[1]) == 1 then redis.call('hset', KEYS[1], '~m', '1') end`)

// listen asks the Lock's current hold to announce its release, which it
// would not do when nobody waits. A hold taken later is marked at the next
// look (a refresh, or settle after a message).
func (w *watcher) listen(ctx context.Context) {
	_ = listenScript.Run(ctx, w.cl.rdb, []string{w.cl.c.Lock(w.name).Key()}).Err()
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// fingerprint identifies a state without its leases and deadlines, which
// change all the time.
func fingerprint(st *relock.LockState) string {
	var b strings.Builder
	hs := func(tag string, hs []relock.Holder) {
		for _, h := range hs {
			b.WriteString(tag + h.Owner + "=" + strconv.Itoa(h.Count) + ";")
		}
	}
	ws := func(tag string, ws []relock.Waiter) {
		for _, w := range ws {
			b.WriteString(tag + w.Owner + ";")
		}
	}
	if l := st.Lock; l != nil {
		hs("L", l.Holders)
		b.WriteString("t" + strconv.FormatInt(l.Token, 10) + ";")
	}
	if f := st.FairLock; f != nil {
		hs("F", f.Holders)
		ws("Q", f.Waiters)
		b.WriteString("t" + strconv.FormatInt(f.Token, 10) + ";")
	}
	if rw := st.RWLock; rw != nil {
		hs("R", rw.Readers)
		if rw.Writer != nil {
			hs("W", []relock.Holder{*rw.Writer})
		}
		ws("V", rw.WritersWaiting)
		b.WriteString("t" + strconv.FormatInt(rw.Token, 10) + ";")
	}
	return b.String()
}
