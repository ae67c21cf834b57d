package relock

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// semaInspect reads a Semaphore (see sema_common.lua and inspect.lua: its
// hash's fields, then "d:<gen>" per hold with its deadline and "q:<id>"
// per waiter, in queue order, with its claim deadline) at server time
// nowMs; nil when nobody holds or waits.
func semaInspect(key string, fields []string, nowMs int64) *inspect.Semaphore {
	f := make(map[string]string, len(fields)/2)
	var queue []string
	for i := 0; i+1 < len(fields); i += 2 {
		f[fields[i]] = fields[i+1]
		if id, ok := strings.CutPrefix(fields[i], "q:"); ok {
			queue = append(queue, id)
		}
	}
	st := &inspect.Semaphore{Key: key}
	st.Permits, _ = strconv.Atoi(f["~p"])
	for k, v := range f {
		gen, ok := strings.CutPrefix(k, "d:")
		dl, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || dl <= nowMs {
			continue
		}
		n, owner, _ := strings.Cut(f["h:"+gen], ":")
		permits, _ := strconv.Atoi(n)
		st.Used += permits
		st.Holders = append(st.Holders, inspect.Holder{Owner: owner, Count: permits, Lease: time.Duration(dl-nowMs) * time.Millisecond})
	}
	sortHolders(st.Holders)
	for _, id := range queue {
		dl, _ := strconv.ParseInt(f["q:"+id], 10, 64)
		e := strings.SplitN(f["w:"+id], ":", 4) // permits, lease, waiter timeout, owner
		if dl <= nowMs || len(e) < 4 {
			continue
		}
		n, _ := strconv.Atoi(e[0])
		st.Waiters = append(st.Waiters, inspect.Waiter{Owner: e[3], Deadline: time.UnixMilli(dl), Remaining: time.Duration(dl-nowMs) * time.Millisecond})
		st.WaiterPermits = append(st.WaiterPermits, n)
	}
	if len(st.Holders) == 0 && len(st.Waiters) == 0 {
		return nil
	}
	return st
}

// sortHolders orders holders by owner, then by permits, so that a snapshot
// reads the same twice.
func sortHolders(hs []inspect.Holder) {
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].Owner != hs[j].Owner {
			return hs[i].Owner < hs[j].Owner
		}
		return hs[i].Count < hs[j].Count
	})
}

// The Semaphore's row in the table of kinds (kinds.go).

// decodeSema reads the Semaphore's hash and its sorted sets (holds by
// deadline, the queue in arrival order, claims by deadline: see
// sema_common.lua) into the fields semaInspect reads: the hash's, then
// "d:<gen>" per hold and "q:<id>" per waiter in queue order.
func decodeSema(st *inspect.State, v []keyValue, nowMs int64) {
	fields := v[0].fields
	if len(fields) > 0 {
		d, q, c := v[1].fields, v[2].fields, v[3].fields
		claims := make(map[string]string, len(c)/2)
		for i := 0; i+1 < len(c); i += 2 {
			claims[c[i]] = c[i+1]
		}
		for i := 0; i+1 < len(d); i += 2 {
			fields = append(fields, "d:"+d[i], d[i+1])
		}
		for i := 0; i+1 < len(q); i += 2 {
			fields = append(fields, "q:"+q[i], cmp.Or(claims[q[i]], "0"))
		}
	}
	st.Semaphore = semaInspect(v[0].key, fields, nowMs)
}

func summarizeSema(st *inspect.State) (inspect.Summary, bool) {
	sm := st.Semaphore
	if sm == nil {
		return inspect.Summary{}, false
	}
	s := inspect.Summary{Holders: len(sm.Holders), Owners: sm.Holders, Waiters: len(sm.Waiters)}
	for _, h := range sm.Holders {
		s.Lease = max(s.Lease, h.Lease)
	}
	return s, true
}

func semaChannels(ks keyspace, ch *inspect.Channels) {
	ch.SemaphoreHandOverPrefix = handOverPrefix(ks.key("sema"))
}

// semaRows: HOLDS is a hold's permits, of the Semaphore's.
func semaRows(st *inspect.State) []kinds.Row {
	sm := st.Semaphore
	if sm == nil {
		return nil
	}
	var rows []kinds.Row
	for _, h := range sm.Holders {
		rows = append(rows, kinds.Row{Role: "holder", Owner: h.Owner, Name: h.Name, Holds: fmt.Sprintf("%d/%d", h.Count, sm.Permits), Expires: h.Lease, Wait: h.WaitsFor})
	}
	for i, w := range sm.Waiters {
		rows = append(rows, kinds.Row{Role: queued(i), Owner: w.Owner, Name: w.Name, Holds: fmt.Sprintf("%d/%d", sm.WaiterPermits[i], sm.Permits), Expires: w.Remaining})
	}
	return rows
}

func forceSema(c *Client, name string, st *inspect.State) []kinds.Release {
	sm := st.Semaphore
	if sm == nil || len(sm.Holders) == 0 {
		return nil
	}
	next := ""
	switch n := len(sm.Waiters); {
	case n == 1:
		next = "1 queued waiter may take the permits"
	case n > 1:
		next = fmt.Sprintf("%d queued waiters may take the permits, in their order", n)
	}
	// The capacity plays no part in a force release; Redis's is passed so
	// that the Semaphore is valid.
	s := c.Semaphore(name, max(sm.Permits, 1))
	return []kinds.Release{{Holders: sm.Holders, Unit: "permit", Next: next, Do: s.ForceRelease, DoIf: guarded(s.ForceReleaseIf)}}
}
