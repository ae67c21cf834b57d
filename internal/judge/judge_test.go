package judge

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ev(proc, kind string, tok int64, ms int, detail ...string) Event {
	return Event{Proc: proc, Kind: kind, Token: tok, At: at(ms), Detail: strings.Join(detail, " ")}
}

const lost = "relock: lock lost: lease expired"

func TestAnalyzeCleanHandOff(t *testing.T) {
	v := Analyze([]Event{
		ev("a", KindEnter, 1, 0), ev("a", KindExit, 1, 10),
		ev("b", KindEnter, 2, 11), ev("b", KindExit, 2, 20),
		ev("a", KindEnter, 3, 21), ev("a", KindLost, 3, 30, lost),
		ev("b", KindEnter, 4, 31), ev("b", KindExit, 4, 40),
	}, []Fault{{Kind: "pause", Target: "redis", Start: at(25), End: at(26)}}, []string{"a", "b"})
	if v.Failed() {
		t.Fatalf("problems: %v", v.Problems)
	}
	if v.Acquisitions != 4 || v.Signalled != 1 || len(v.Overlaps) != 0 || v.MaxHandoff != 6*time.Millisecond {
		t.Fatalf("got %s", v.Summary())
	}
}

func TestAnalyzeOverlapOrderedAndTold(t *testing.T) {
	// a is stopped past its lease; b gets in with a larger token; a is told
	// when it resumes.
	v := Analyze([]Event{
		ev("a", KindEnter, 5, 0),
		ev("b", KindEnter, 6, 100), ev("b", KindExit, 6, 200),
		ev("a", KindLost, 5, 150, lost), ev("a", KindUnlockErr, 5, 151, lost),
	}, nil, []string{"a", "b"})
	if v.Failed() {
		t.Fatalf("problems: %v", v.Problems)
	}
	if v.Ordered != 1 || v.Unordered != 0 || v.Untold != 0 || v.MaxOverlap != 50*time.Millisecond {
		t.Fatalf("got %s", v.Summary())
	}
}

func TestAnalyzeOverlapNotAllowed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		events     []Event
		unordered  int
		untold     int
		regression bool
	}{
		{
			name: "EqualTokens", // a counter that restarted with Redis
			events: []Event{
				ev("a", KindEnter, 1, 0), ev("a", KindLost, 1, 150, lost),
				ev("b", KindEnter, 1, 100), ev("b", KindExit, 1, 200),
			},
			unordered: 1, regression: true,
		},
		{
			name: "LoserNotTold", // a left believing, and even its Unlock said nothing
			events: []Event{
				ev("a", KindEnter, 1, 0), ev("a", KindExit, 1, 150),
				ev("b", KindEnter, 2, 100), ev("b", KindExit, 2, 200),
			},
			untold: 1,
		},
		{
			name: "ClosedIsNotTold",
			events: []Event{
				ev("a", KindEnter, 1, 0), ev("a", KindLost, 1, 150, "relock: client closed"),
				ev("b", KindEnter, 2, 100), ev("b", KindExit, 2, 200),
			},
			untold: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Analyze(tc.events, nil, []string{"a", "b"})
			if !v.Failed() || v.Unordered != tc.unordered || v.Untold != tc.untold || (len(v.Regressions) > 0) != tc.regression {
				t.Fatalf("got %s; problems %v", v.Summary(), v.Problems)
			}
			if !strings.Contains(v.Problems[0], "overlap") || !strings.Contains(v.Problems[0], "b enter") {
				t.Fatalf("the problem does not show the events: %s", v.Problems[0])
			}
			if tc.unordered > 0 != strings.Contains(v.Broken(), RuleUnordered) || tc.untold > 0 != strings.Contains(v.Broken(), RuleUntold) {
				t.Fatalf("Broken() = %q", v.Broken())
			}
		})
	}
}

func TestAnalyzeRegressionWithoutOverlap(t *testing.T) {
	v := Analyze([]Event{
		ev("a", KindEnter, 4, 0), ev("a", KindExit, 4, 10),
		ev("b", KindEnter, 1, 20), ev("b", KindExit, 1, 30),
	}, nil, []string{"a", "b"})
	if len(v.Regressions) != 1 || len(v.Overlaps) != 0 || !strings.Contains(v.Problems[0], "token went from 4") {
		t.Fatalf("got %s; problems %v", v.Summary(), v.Problems)
	}
}

func TestAnalyzeProgressAndOpenHolds(t *testing.T) {
	v := Analyze([]Event{ev("a", KindEnter, 1, 0), ev("a", KindDone, 0, 5)},
		[]Fault{{Kind: "restart", Start: at(3), End: at(4)}}, []string{"a", "b"})
	var got []string
	for _, p := range v.Problems {
		got = append(got, strings.SplitN(p, ":", 2)[0])
	}
	want := []string{"a never ended its hold with token 1 (entered at +0.0ms)", "b made no progress", "no hold was entered after the restart fault injected at +3.0ms"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("problems:\n%s", strings.Join(v.Problems, "\n"))
	}
	v.AddLeftover([]string{"relock:{x}:fence"})
	if len(v.Leftover) != 1 || !strings.Contains(v.Problems[3], "relock:{x}:fence") {
		t.Fatal(v.Problems)
	}
	if got, want := v.Broken(), "no progress ×2, key without TTL ×1, run ×1"; got != want {
		t.Fatalf("Broken() = %q, want %q", got, want)
	}
}

func TestProtocol(t *testing.T) {
	j, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	r, err := Dial(j.Addr(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Enter(7, at(1)); err != nil {
		t.Fatal(err)
	}
	if !j.WaitFor(5*time.Second, func(s *State) bool { return s.Inside["p1"].Token == 7 }) {
		t.Fatal("the judge did not see the enter")
	}
	if err := r.Lost(7, at(2), errors.New("relock: lock lost: the hold was gone\nwhen renewed")); err != nil {
		t.Fatal(err)
	}
	if err := r.Done(at(3), 1); err != nil {
		t.Fatal(err)
	}
	if !j.WaitFor(5*time.Second, func(s *State) bool { return s.Done["p1"] && len(s.Inside) == 0 }) {
		t.Fatal("the judge did not see the end")
	}
	stopped := make(chan struct{})
	go func() { r.WaitStop(); close(stopped) }()
	j.Stop()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not reach the process")
	}
	events, _, errs := j.Snapshot()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []string{"p1 hello", "p1 enter 7", "p1 lost 7 relock: lock lost: the hold was gone when renewed", "p1 done 1"}
	var got []string
	for _, e := range events {
		s := e.String()
		if e.Kind == KindHello {
			s = "p1 hello"
		}
		got = append(got, s)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q", got)
	}
	if !events[1].At.Equal(at(1)) {
		t.Fatalf("time %v", events[1].At)
	}
}
