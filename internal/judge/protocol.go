// Package judge is the referee of the multi-process safety run: holder
// processes (internal/holderproc in worker mode) report every hold they enter,
// leave or lose, with its fencing token and the time, to a Judge listening on
// loopback; the Judge records them with the faults the test injects, and
// Analyze turns the record into a verdict: overlapping holds are allowed only
// when the fencing tokens order them and the earlier holder was told it lost
// the lock.
//
// The protocol is one line per event, process to judge:
//
//	<proc> <kind> <token> <unix ns> [detail]
//
// kind is hello (token: the pid), enter, exit, lost (detail: the context's
// cause), unlock-err (detail: Unlock's error), void (granted, but lost before
// it could be entered), lock-err (detail: TryLock's error) or done (token:
// holds taken). The judge sends "stop" to end the run: a process finishes the
// hold it is in and takes no new one.
package judge

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event kinds.
const (
	KindHello     = "hello"
	KindEnter     = "enter"
	KindExit      = "exit"
	KindLost      = "lost"
	KindUnlockErr = "unlock-err"
	KindVoid      = "void"
	KindLockErr   = "lock-err"
	KindDone      = "done"
)

// Event is one line a process reported.
type Event struct {
	Proc   string
	Kind   string
	Token  int64
	At     time.Time // the process's clock (same machine: comparable)
	Detail string
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %s %d", e.Proc, e.Kind, e.Token)
	if e.Detail != "" {
		s += " " + e.Detail
	}
	return s
}

func formatEvent(e Event) string {
	detail := strings.Join(strings.Fields(e.Detail), " ") // one line
	line := fmt.Sprintf("%s %s %d %d", e.Proc, e.Kind, e.Token, e.At.UnixNano())
	if detail != "" {
		line += " " + detail
	}
	return line + "\n"
}

func parseEvent(line string) (Event, error) {
	f := strings.SplitN(strings.TrimRight(line, "\r\n"), " ", 5)
	if len(f) < 4 {
		return Event{}, fmt.Errorf("judge: malformed event %q", line)
	}
	tok, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return Event{}, fmt.Errorf("judge: bad token in %q: %w", line, err)
	}
	ns, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return Event{}, fmt.Errorf("judge: bad time in %q: %w", line, err)
	}
	e := Event{Proc: f[0], Kind: f[1], Token: tok, At: time.Unix(0, ns)}
	if len(f) == 5 {
		e.Detail = f[4]
	}
	return e, nil
}

// Reporter is a process's side of the protocol.
type Reporter struct {
	id   string
	conn net.Conn
	mu   sync.Mutex
	r    *bufio.Reader
}

// Dial connects to the judge at addr and introduces the process as id.
func Dial(addr, id string) (*Reporter, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("judge: dial %s: %w", addr, err)
	}
	r := &Reporter{id: id, conn: conn, r: bufio.NewReader(conn)}
	if err := r.send(KindHello, int64(os.Getpid()), time.Now(), ""); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return r, nil
}

// send writes one event; it returns when the line is handed to the kernel,
// so that the judge has it even if the process is stopped right after.
func (r *Reporter) send(kind string, token int64, at time.Time, detail string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.conn.Write([]byte(formatEvent(Event{Proc: r.id, Kind: kind, Token: token, At: at, Detail: detail})))
	if err != nil {
		return fmt.Errorf("judge: report %s: %w", kind, err)
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Enter reports that the process entered its critical section with token.
func (r *Reporter) Enter(token int64, at time.Time) error { return r.send(KindEnter, token, at, "") }

// EnterAs is Enter for a hold that Redis records under owner (its owner
// field), so that the judge can follow each hold in Redis to its holder.
func (r *Reporter) EnterAs(token int64, at time.Time, owner string) error {
	return r.send(KindEnter, token, at, owner)
}

// Exit reports that the process left its critical section, its hold still live.
func (r *Reporter) Exit(token int64, at time.Time) error { return r.send(KindExit, token, at, "") }

// Lost reports that the hold's context ended (cause) while the process was
// inside: it stopped its work at once.
func (r *Reporter) Lost(token int64, at time.Time, cause error) error {
	return r.send(KindLost, token, at, errText(cause))
}

// UnlockErr reports that Unlock of the hold with token failed.
func (r *Reporter) UnlockErr(token int64, at time.Time, err error) error {
	return r.send(KindUnlockErr, token, at, errText(err))
}

// Void reports a grant whose hold had ended before the process could enter.
func (r *Reporter) Void(at time.Time, cause error) error {
	return r.send(KindVoid, 0, at, errText(cause))
}

// LockErr reports a failed acquire.
func (r *Reporter) LockErr(at time.Time, err error) error {
	return r.send(KindLockErr, 0, at, errText(err))
}

// Done reports the end of the run, after holds holds.
func (r *Reporter) Done(at time.Time, holds int) error {
	return r.send(KindDone, int64(holds), at, "")
}

// WaitStop returns when the judge says "stop" or goes away.
func (r *Reporter) WaitStop() {
	for {
		line, err := r.r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) == "stop" {
			return
		}
	}
}

// Close closes the connection to the judge.
func (r *Reporter) Close() error { return r.conn.Close() }
