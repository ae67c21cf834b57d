package relock

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/inspect"
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
