package relock

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/inspect"
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

// summarize lives here, beside the Semaphore's inspection, to keep
// inspect.go within its size.

// summarize turns a state into one summary per kind that exists.
func summarize(st *inspect.State) []inspect.Summary {
	var out []inspect.Summary
	if l := st.Lock; l != nil {
		out = append(out, inspect.Summary{Name: st.Name, Kind: inspect.KindLock, Holders: len(l.Holders), Waiters: len(l.Queued), Lease: l.Lease, Token: l.Token})
	}
	if f := st.FairLock; f != nil {
		out = append(out, inspect.Summary{Name: st.Name, Kind: inspect.KindFairLock, Holders: len(f.Holders), Waiters: len(f.Waiters), Lease: f.Lease, Token: f.Token})
	}
	if rw := st.RWLock; rw != nil {
		s := inspect.Summary{Name: st.Name, Kind: inspect.KindRWLock, Holders: len(rw.Readers), Waiters: len(rw.WritersWaiting), Token: rw.Token}
		for _, h := range rw.Readers {
			s.Lease = max(s.Lease, h.Lease)
		}
		if rw.Writer != nil {
			s.Holders++
			s.Lease = max(s.Lease, rw.Writer.Lease)
		}
		out = append(out, s)
	}
	if sm := st.Semaphore; sm != nil {
		s := inspect.Summary{Name: st.Name, Kind: inspect.KindSemaphore, Holders: len(sm.Holders), Waiters: len(sm.Waiters)}
		for _, h := range sm.Holders {
			s.Lease = max(s.Lease, h.Lease)
		}
		out = append(out, s)
	}
	if l := st.CountDownLatch; l != nil {
		out = append(out, inspect.Summary{Name: st.Name, Kind: inspect.KindCountDownLatch, Count: l.Count})
	}
	return out
}
