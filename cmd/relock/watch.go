package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// settle is how long after a message watch looks again: a release is often
// followed at once by a waiter's acquire, which publishes nothing.
const settle = 250 * time.Millisecond

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
	chans   inspect.Channels
	classic *redis.PubSub // SUBSCRIBE: PUBLISH (one server, or a Cluster without sharded pub/sub)
	sharded *redis.PubSub // SSUBSCRIBE on a Cluster: SPUBLISH, relock's default there
	msgs    chan *redis.Message
	last    string // fingerprint of the last state printed
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
	w := &watcher{cl: cl, name: name, chans: chans, msgs: make(chan *redis.Message)}
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

// subscribe listens on the channels of the name and waits until the server
// confirmed, so that no release after the first print can be missed. It
// does not listen where Lock, FairLock, RWLock and Semaphore hand themselves
// over (the waiting Clients' channels): a release counts the receivers there
// to skip a waiter whose Client is gone, and a watcher would make every such
// waiter look alive. It marks the locks' holds instead (see listen). A
// Semaphore has no mark and no channel of its own, so its releases and
// hand-overs show at the next re-read (--refresh); the latch's channel
// tells of the CountDown that opens it, the others show at the re-read too.
func (w *watcher) subscribe(ctx context.Context) error {
	rdb := w.cl.rdb
	var exact []string
	for _, k := range kinds.Table {
		if k.Watched != nil {
			exact = append(exact, k.Watched(w.chans)...)
		}
	}
	w.classic = rdb.Subscribe(ctx, exact...)
	if err := confirm(ctx, w.classic, len(exact)); err != nil {
		return err
	}
	go w.forward(ctx, w.classic)
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		ps := cc.SSubscribe(ctx, exact...)
		if err := confirm(ctx, ps, len(exact)); err != nil {
			_ = ps.Close()
			var reply redis.Error
			if errors.As(err, &reply) {
				return nil // no sharded pub/sub here (Redis 6.2): relock publishes on the classic channels
			}
			return err
		}
		w.sharded = ps
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
	for _, ps := range []*redis.PubSub{w.classic, w.sharded} {
		if ps != nil {
			_ = ps.Close()
		}
	}
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
	w.listen(ctx, st)
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

// listenScript marks held locks as listened to (KEYS[i] gets field
// ARGV[i]): a Lock's or FairLock's ~m, as a waiting MultiLock sets it, and
// an RWLock's ~r, as a waiting reader does. relock publishes a release or a
// hand-over only when someone waits or listens. It never creates a hash: a
// free lock stays free.
var listenScript = redis.NewScript(`for i, k in ipairs(KEYS) do
	if redis.call('exists', k) == 1 then redis.call('hset', k, ARGV[i], '1') end
end`)

// listen asks the current holds of the name to announce their release or
// hand-over, which they would not do when nobody waits or listens. A hold
// taken later is marked at the next look (a refresh, or settle after a
// message).
func (w *watcher) listen(ctx context.Context, st *inspect.State) {
	var keys []string
	var fields []any
	for _, k := range kinds.Table {
		if k.Listen == nil {
			continue
		}
		if key, field := k.Listen(st); key != "" {
			keys, fields = append(keys, key), append(fields, field)
		}
	}
	if len(keys) > 0 {
		_ = listenScript.Run(ctx, w.cl.rdb, keys, fields...).Err()
	}
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// fingerprint identifies a state without its leases and deadlines, which
// change all the time: the table's rows without their EXPIRES IN.
func fingerprint(st *inspect.State) string {
	var b strings.Builder
	for _, k := range kinds.Table {
		for _, r := range k.Rows(st) {
			b.WriteString(string(k.View) + "\x00" + r.Role + "\x00" + r.Owner + "\x00" + r.Holds + "\x00" + strconv.FormatInt(r.Token, 10) + "\n")
		}
	}
	return b.String()
}
