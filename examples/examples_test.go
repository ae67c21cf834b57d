package examples_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every example program, built once and run as a newcomer runs it (no
// REDIS_URL: an embedded miniredis), tells its story: these lines, in this
// order, each a regexp matched against one line of its output.
var stories = map[string][]string{
	"quickstart": {
		`^relock quickstart on an embedded miniredis`,
		`A\s+createOrder: locked "order:1001" \(hold count 1, fencing token \d+\)`,
		`A\s+deductStock: re-entered the lock, hold count 2`,
		`B\s+TryLock without waiting: relock: lock not obtained`,
		`B\s+Lock: got it right after A's unlock`,
		`B\s+unlocked; IsLocked = false`,
	},
	"worker": {
		`^relock worker on an embedded miniredis`,
		`other\s+holds order:3`,
		`worker\s+order 1: committed 50 with fencing token \d+`,
		`worker\s+order 2: committed 125 with fencing token \d+`,
		`worker\s+order 3: not obtained within 300ms, left for a retry: relock: lock not obtained: context deadline exceeded`,
		`worker\s+order 4: committed 100 with fencing token \d+`,
		`worker\s+SIGTERM: stopped taking jobs; closing the Client`,
		`worker\s+closed: committed map\[1:50 2:125 4:100\]`,
	},
	"fairlock": {
		`^relock fairlock on an embedded miniredis`,
		`A\s+locked "printer"`,
		`B\s+asks for it: waits in the queue, position 1`,
		`C\s+asks for it: waits in the queue, position 2`,
		`D\s+asks for it: waits in the queue, position 3`,
		`A\s+unlocks: only the first in the queue is woken`,
		`B\s+got the lock`,
		`C\s+got the lock`,
		`D\s+got the lock`,
		`grant order: B C D, the order they asked in$`,
	},
	"rwlock": {
		`^relock rwlock on an embedded miniredis`,
		`R1\s+reading the prices`,
		`R2\s+reading too`,
		`W\s+wants to write`,
		`R3\s+wants to read: a writer waits`,
		`R1\s+done reading`,
		`R2\s+done reading`,
		`W\s+writing new prices \(fencing token \d+\)`,
		`W\s+done writing`,
		`R3\s+reading the new prices`,
		`R3\s+asks for the write lock while reading: ErrUpgrade`,
	},
	"multilock": {
		`^relock multilock on an embedded miniredis`,
		`40 transfers in .*, no deadlock: alice 100, bob 100, total 200$`,
		`auditor\s+holds bob's account`,
		`TryLock \{bob, carol\}: not obtained = true, carol locked = false`,
	},
	"redlock": {
		`^relock redlock on three embedded miniredis servers`,
		`a majority is 2 of 3 masters`,
		`locked "report": valid for .*, fencing token \d+`,
		`app\s+unlocked`,
		`master 3\s+down`,
		`locked "report": valid for .*, fencing token \d+`,
		`master 2\s+down`,
		`not obtained = true \(no majority\)`,
	},
	"fencing": {
		`^relock fencing on an embedded miniredis`,
		`A\s+locked "invoice:42" with a 500ms lease, fencing token \d+`,
		`A\s+paused for 800ms`,
		`B\s+locked "invoice:42", fencing token \d+`,
		`B\s+writes with token \d+: accepted`,
		`A\s+wakes up and writes with token \d+: rejected: stale token`,
		`A\s+\(its lock's context had ended with "relock: lock lost`,
		`storage\s+holds "from B"`,
	},
	"semaphore": {
		`^relock semaphore on an embedded miniredis`,
		`crashed\s+took 1 permit and died without releasing it`,
		`P\d\s+3 jobs at once: the dead process's permit came back`,
		`coordinator the latch opened: all 5 processes done`,
		`coordinator 15 jobs ran, at most 3 at once; 3 of 3 permits free again$`,
	},
	"deadlock": {
		`^relock deadlock on an embedded miniredis`,
		`[AB]\s+told after [0-9.]+s: ErrDeadlock \(and ErrNotObtained: true\)`,
		`[AB]\s+releases "account:\w+" and will try again`,
		`[AB]\s+locked "account:\w+" too: transfers, then unlocks both`,
		`[AB]\s+locked "account:\w+" too: transfers, then unlocks both`,
		`both transfers done; nothing left locked$`,
	},
	"observe": {
		`^relock observe on an embedded miniredis`,
		`A\s+locked "orders"`,
		`A\s+re-entered it`,
		`B\s+waits for "orders"`,
		`B\s+got it, then unlocked`,
		`A\s+its context ended: relock: lock lost: lease expired`,
		`B\s+closed its Client: the lock was released and the hold's context ended with relock: client closed: Close releases the hold`,
	},
}

// observeEvents are the lines the observe example's hooks print, in any
// order.
var observeEvents = []string{
	`event\s+acquired lock "orders": .* contended=false reentry=false`,
	`event\s+acquired lock "orders": .* reentry=true`,
	`event\s+released lock "orders": .* final=false err=<nil>`,
	`event\s+released lock "orders": .* final=true err=<nil>`,
	`event\s+wait ended lock "orders": .* not obtained=false`,
	`event\s+acquired lock "orders": .* contended=true`,
	`event\s+lost lock "report" .*: expired \(relock: lock lost: lease expired\)`,
	`event\s+wait started lock "orders"`,
	`event\s+woken lock "orders"`,
}

// Not checked: Renewed (a watchdog tick falls inside B's 450ms wait, but a
// slow machine may miss it).

func TestExamples(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the examples: %v", err)
	}
	dir := t.TempDir()
	build, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		// Under go test -race: the same build flags as the test's own
		// dependencies (cached already), and the examples checked for races.
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(build, goBin, append(args, "./...")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/...: %v\n%s", err, out)
	}

	// Every example program has a story to check, and every story a program.
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "internal" && e.Name() != "testdata" {
			if _, ok := stories[e.Name()]; !ok {
				t.Errorf("examples/%s has no story in examples_test.go", e.Name())
			}
		}
	}

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") {
			env = append(env, kv)
		}
	}
	for name, story := range stories {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(dir, name))
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("go run ./examples/%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, stdout.String(), stderr.String())
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("it ran for %v; an example ends in a few seconds", d)
			}
			lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
			checkInOrder(t, lines, story)
			if name == "observe" {
				checkEvents(t, lines)
			}
			if t.Failed() {
				t.Logf("output of %s:\n%s\nstderr:\n%s", name, stdout.String(), stderr.String())
			}
		})
	}

	// A malformed REDIS_URL is refused without showing its password
	// (go-redis's parse error quotes the URL): quickstart parses it itself,
	// worker through the examples' shared helper.
	for _, name := range []string{"quickstart", "worker"} {
		t.Run(name+"/MalformedURL", func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, name))
			cmd.Env = append(env, "REDIS_URL=redis://user:s3cretPW@127.0.0.1:badport")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err == nil {
				t.Fatalf("it ran with a malformed REDIS_URL:\n%s", out.String())
			}
			if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "REDIS_URL") {
				t.Errorf("want a message about REDIS_URL without its password, got:\n%s", out.String())
			}
		})
	}
}

// checkInOrder finds each pattern on a line after the previous one's.
func checkInOrder(t *testing.T, lines, patterns []string) {
	t.Helper()
	at := 0
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		found := false
		for at < len(lines) {
			at++
			if re.MatchString(lines[at-1]) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no line matching %q (after the previous expected line)", p)
			return
		}
	}
}

func checkEvents(t *testing.T, lines []string) {
	t.Helper()
	for _, p := range observeEvents {
		re := regexp.MustCompile(p)
		found := false
		for _, l := range lines {
			if re.MatchString(l) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no event line matching %q", p)
		}
	}
}
