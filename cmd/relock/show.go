package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// The JSON the command prints. Durations are milliseconds, times RFC 3339
// on the Redis server's clock.

type jsonState struct {
	Name       string     `json:"name"`
	Exists     bool       `json:"exists"`
	ServerTime time.Time  `json:"server_time"`
	Kinds      []string   `json:"kinds"`
	Lock       *jsonExcl  `json:"lock,omitempty"`
	FairLock   *jsonFair  `json:"fairlock,omitempty"`
	RWLock     *jsonRW    `json:"rwlock,omitempty"`
	Semaphore  *jsonSema  `json:"semaphore,omitempty"`
	Latch      *jsonLatch `json:"countdownlatch,omitempty"`
}

// jsonLatch is a closed CountDownLatch (an open one has no state).
type jsonLatch struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
}

type jsonSema struct {
	Key           string       `json:"key"`
	Permits       int          `json:"permits"`
	Used          int          `json:"used"`
	Holders       []jsonHolder `json:"holders"` // count: the hold's permits
	Waiters       []jsonWaiter `json:"waiters"`
	WaiterPermits []int        `json:"waiter_permits"`
}

type jsonHolder struct {
	Owner    string    `json:"owner"`
	Name     string    `json:"name,omitempty"` // its Client's (relock.WithName), when known
	Count    int       `json:"count"`
	LeaseMs  int64     `json:"lease_ms"`
	WaitsFor *jsonWait `json:"waits_for,omitempty"`
}

// jsonWait is the lock a holder's owner waits for; since is on the clock
// of the waiter's Client.
type jsonWait struct {
	Kind  string    `json:"kind"`
	Name  string    `json:"name"`
	Since time.Time `json:"since"`
}

type jsonWaiter struct {
	Owner       string     `json:"owner"`
	Name        string     `json:"name,omitempty"`
	Deadline    *time.Time `json:"deadline,omitempty"`
	RemainingMs int64      `json:"remaining_ms"`
}

type jsonExcl struct {
	Key     string       `json:"key"`
	Holders []jsonHolder `json:"holders"`
	LeaseMs int64        `json:"lease_ms"`
	Token   int64        `json:"token"`
	Queued  []jsonWaiter `json:"queued,omitempty"` // a Lock's waiters, in hand-over order
}

type jsonFair struct {
	jsonExcl
	QueueKey string       `json:"queue_key"`
	Waiters  []jsonWaiter `json:"waiters"`
}

type jsonRW struct {
	Key            string       `json:"key"`
	Readers        []jsonHolder `json:"readers"`
	Writer         *jsonHolder  `json:"writer"`
	Token          int64        `json:"token"`
	WritersWaiting []jsonWaiter `json:"writers_waiting"`
}

type jsonSummary struct {
	Name    string      `json:"name"`
	Kind    string      `json:"kind"`
	Holders int         `json:"holders"`
	Owners  []jsonOwner `json:"owners"`
	Waiters int         `json:"waiters"`
	LeaseMs int64       `json:"lease_ms"`
	Token   int64       `json:"token"`
	Count   int         `json:"count,omitempty"` // a CountDownLatch's count left
}

// jsonOwner is an owner and its Client's name, when known.
type jsonOwner struct {
	Owner string `json:"owner"`
	Name  string `json:"name,omitempty"`
}

func jsonOwners(hs []inspect.Holder) []jsonOwner {
	out := make([]jsonOwner, 0, len(hs))
	for _, h := range hs {
		out = append(out, jsonOwner{Owner: h.Owner, Name: h.Name})
	}
	return out
}

// ownersCell is the OWNERS cell of list's table: up to listedOwners
// owners, each with its Client's name when known, and how many more.
func ownersCell(hs []inspect.Holder) string {
	if len(hs) == 0 {
		return "-"
	}
	parts := make([]string, 0, min(len(hs), listedOwners)+1)
	for _, h := range hs[:min(len(hs), listedOwners)] {
		parts = append(parts, ownerText(h.Owner, h.Name))
	}
	if more := len(hs) - listedOwners; more > 0 {
		parts = append(parts, "+"+strconv.Itoa(more)+" more")
	}
	return strings.Join(parts, ", ")
}

// listedOwners bounds the owners a line of list's table shows; --json
// lists them all.
const listedOwners = 3

// ownerText is owner followed by its Client's name in parentheses, when
// known, as relock's errors write it.
func ownerText(owner, name string) string {
	if name == "" {
		return owner
	}
	return owner + " (" + printable(name) + ")"
}

func holders(hs []inspect.Holder) []jsonHolder {
	out := make([]jsonHolder, 0, len(hs))
	for _, h := range hs {
		jh := jsonHolder{Owner: h.Owner, Name: h.Name, Count: h.Count, LeaseMs: h.Lease.Milliseconds()}
		if w := h.WaitsFor; w != nil {
			jh.WaitsFor = &jsonWait{Kind: w.Kind, Name: w.Name, Since: w.Since.UTC()}
		}
		out = append(out, jh)
	}
	return out
}

func waiters(ws []inspect.Waiter) []jsonWaiter {
	out := make([]jsonWaiter, 0, len(ws))
	for _, w := range ws {
		jw := jsonWaiter{Owner: w.Owner, Name: w.Name, RemainingMs: w.Remaining.Milliseconds()}
		if !w.Deadline.IsZero() {
			d := w.Deadline.UTC()
			jw.Deadline = &d
		}
		out = append(out, jw)
	}
	return out
}

func excl(e inspect.Exclusive) jsonExcl {
	return jsonExcl{Key: e.Key, Holders: holders(e.Holders), LeaseMs: e.Lease.Milliseconds(), Token: e.Token, Queued: waiters(e.Queued)}
}

// toJSON converts a state to the command's JSON shape.
func toJSON(st *inspect.State) *jsonState {
	js := &jsonState{Name: st.Name, Exists: st.Exists(), ServerTime: st.ServerTime.UTC(), Kinds: []string{}}
	for _, k := range st.Kinds() {
		js.Kinds = append(js.Kinds, string(k))
	}
	if st.Lock != nil {
		e := excl(*st.Lock)
		js.Lock = &e
	}
	if f := st.FairLock; f != nil {
		js.FairLock = &jsonFair{jsonExcl: excl(f.Exclusive), QueueKey: f.QueueKey, Waiters: waiters(f.Waiters)}
	}
	if rw := st.RWLock; rw != nil {
		j := &jsonRW{Key: rw.Key, Readers: holders(rw.Readers), Token: rw.Token, WritersWaiting: waiters(rw.WritersWaiting)}
		if rw.Writer != nil {
			w := holders([]inspect.Holder{*rw.Writer})[0]
			j.Writer = &w
		}
		js.RWLock = j
	}
	if sm := st.Semaphore; sm != nil {
		js.Semaphore = &jsonSema{Key: sm.Key, Permits: sm.Permits, Used: sm.Used, Holders: holders(sm.Holders),
			Waiters: waiters(sm.Waiters), WaiterPermits: append([]int{}, sm.WaiterPermits...)}
	}
	if l := st.CountDownLatch; l != nil {
		js.Latch = &jsonLatch{Key: l.Key, Count: l.Count}
	}
	return js
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// dur renders a remaining time for the tables.
func dur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// count renders a CountDownLatch's count; the other kinds have none.
func count(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func token(t int64) string {
	if t == 0 {
		return "-"
	}
	return strconv.FormatInt(t, 10)
}

// waits renders, after a holder's row, the lock its owner waits for and
// for how long at now (the waiter's clock may differ from now's: a negative
// span shows as 0s).
func waits(w *inspect.Wait, now time.Time) string {
	if w == nil {
		return ""
	}
	return fmt.Sprintf("\twaits for %s %s since %s", w.Kind, printable(w.Name), max(now.Sub(w.Since), 0).Round(time.Millisecond))
}

// clientName is the NAME cell of a row: its owner's Client's name, "-"
// when unknown (or for a row without an owner).
func clientName(r kinds.Row) string {
	if r.Name == "" {
		return "-"
	}
	return printable(r.Name)
}

// printState prints the table of a state: one row per holder and waiter,
// each kind's as the table of kinds says.
func printState(w io.Writer, st *inspect.State) {
	if !st.Exists() {
		fmt.Fprintf(w, "no lock %s\n", st.Name)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tROLE\tOWNER\tNAME\tHOLDS\tEXPIRES IN\tTOKEN")
	for _, k := range kinds.Table {
		for _, r := range k.Rows(st) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", k.Type, r.Role, r.Owner, clientName(r), r.Holds, dur(r.Expires), token(r.Token), waits(r.Wait, st.ServerTime))
		}
	}
	_ = tw.Flush()
}

func (cl *cli) inspect(ctx context.Context, name string) int {
	st, err := cl.c.Inspect(ctx, name)
	if err != nil {
		return cl.fail("inspect", err)
	}
	if cl.json {
		if err := writeJSON(cl.stdout, toJSON(st)); err != nil {
			return cl.fail("write", err)
		}
		return exitOK
	}
	printState(cl.stdout, st)
	return exitOK
}

func (cl *cli) list(ctx context.Context, pattern string) int {
	locks, err := cl.c.ListLocks(ctx, pattern)
	if err != nil {
		return cl.fail("list", err)
	}
	if cl.json {
		out := make([]jsonSummary, 0, len(locks))
		for _, s := range locks {
			out = append(out, jsonSummary{Name: s.Name, Kind: string(s.Kind), Holders: s.Holders, Owners: jsonOwners(s.Owners), Waiters: s.Waiters,
				LeaseMs: s.Lease.Milliseconds(), Token: s.Token, Count: s.Count})
		}
		if err := writeJSON(cl.stdout, out); err != nil {
			return cl.fail("write", err)
		}
		return exitOK
	}
	if len(locks) == 0 {
		if pattern == "" || pattern == "*" {
			fmt.Fprintln(cl.stdout, "no locks")
		} else {
			fmt.Fprintf(cl.stdout, "no locks match %s\n", pattern)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(cl.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDERS\tWAITERS\tEXPIRES IN\tTOKEN\tCOUNT\tOWNERS")
	for _, s := range locks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", printable(s.Name), kindName(s.Kind), s.Holders, s.Waiters, dur(s.Lease), token(s.Token), count(s.Count), ownersCell(s.Owners))
	}
	_ = tw.Flush()
	return exitOK
}

// printable quotes a name that would break a table line.
func printable(name string) string {
	if strings.ContainsAny(name, " \t\r\n") || !strconv.CanBackquote(name) {
		return strconv.Quote(name)
	}
	return name
}
