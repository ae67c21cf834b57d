package relock

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// semaInspect reads a Semaphore's hash (see sema_common.lua) at server time
// nowMs; nil when nobody holds or waits.
func semaInspect(key string, fields []string, nowMs int64) *inspect.Semaphore {
	f := make(map[string]string, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		f[fields[i]] = fields[i+1]
	}
	st := &inspect.Semaphore{Key: key}
	st.Permits, _ = strconv.Atoi(f["~p"])
	for k, v := range f {
		gen, ok := strings.CutPrefix(k, "d:")
		dl, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || dl <= nowMs {
			continue
		}
		n, _ := strconv.Atoi(f["n:"+gen])
		st.Used += n
		st.Holders = append(st.Holders, inspect.Holder{Owner: f["o:"+gen], Count: n, Lease: time.Duration(dl-nowMs) * time.Millisecond})
	}
	sortHolders(st.Holders)
	for q := f["~q"]; q != ""; {
		e := strings.SplitN(q, "\x00", 6)
		if len(e) < 6 {
			break
		}
		q = e[5]
		dl, _ := strconv.ParseInt(e[4], 10, 64)
		if dl <= nowMs {
			continue
		}
		n, _ := strconv.Atoi(e[1])
		at := time.UnixMilli(dl)
		st.Waiters = append(st.Waiters, inspect.Waiter{Owner: e[3], Deadline: at, Remaining: time.Duration(dl-nowMs) * time.Millisecond})
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

func decodeSema(st *inspect.State, v []keyValue, nowMs int64) {
	st.Semaphore = semaInspect(v[0].key, v[0].fields, nowMs)
}

func summarizeSema(st *inspect.State) (inspect.Summary, bool) {
	sm := st.Semaphore
	if sm == nil {
		return inspect.Summary{}, false
	}
	s := inspect.Summary{Holders: len(sm.Holders), Waiters: len(sm.Waiters)}
	for _, h := range sm.Holders {
		s.Lease = max(s.Lease, h.Lease)
	}
	return s, true
}

func semaChannels(ks keyspace, ch *inspect.Channels) {
	ch.SemaphoreHandOverPrefix = ks.key("sema") + ":w:"
}

// semaRows: HOLDS is a hold's permits, of the Semaphore's.
func semaRows(st *inspect.State) []kinds.Row {
	sm := st.Semaphore
	if sm == nil {
		return nil
	}
	var rows []kinds.Row
	for _, h := range sm.Holders {
		rows = append(rows, kinds.Row{Role: "holder", Owner: h.Owner, Holds: fmt.Sprintf("%d/%d", h.Count, sm.Permits), Expires: h.Lease})
	}
	for i, w := range sm.Waiters {
		rows = append(rows, kinds.Row{Role: queued(i), Owner: w.Owner, Holds: fmt.Sprintf("%d/%d", sm.WaiterPermits[i], sm.Permits), Expires: w.Remaining})
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
	return []kinds.Release{{Holders: sm.Holders, Unit: "permit", Next: next, Do: c.Semaphore(name, max(sm.Permits, 1)).ForceRelease}}
}
