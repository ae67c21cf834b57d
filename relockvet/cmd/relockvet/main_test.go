package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// user is a small program with one of each reported mistake, and a
// goroutine given its own owner (NewOwner), which is not reported.
const user = `package m

import (
	"context"

	"github.com/relock-go/relock"
)

func Discard(ctx context.Context, l *relock.Lock) error {
	_, err := l.Lock(ctx)
	return err
}

func WrongUnlock(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	_ = hctx
	return l.Unlock(ctx)
}

func Loop(ctx context.Context, l *relock.Lock, n int) (err error) {
	for range n {
		if ctx, err = l.Lock(ctx); err != nil {
			return err
		}
	}
	return nil
}

func Fine(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	return l.Do(hctx, func(ctx context.Context) error { return nil })
}

func SharedHold(ctx context.Context, l, item *relock.Lock, jobs []string) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	for range jobs {
		go func() {
			_ = item.Do(hctx, func(ctx context.Context) error { return nil })
		}()
		go func() {
			_ = item.Do(relock.NewOwner(hctx), func(ctx context.Context) error { return nil })
		}()
	}
	return nil
}
`

var want = []string{
	"m.go:10:12: the hold context returned by l.Lock is discarded",
	"m.go:20:9: l.Unlock is given ctx, not the hold context",
	"m.go:25:6: ctx, err = l.Lock(ctx) in a loop re-enters the hold",
	"m.go:49:8: item.Do in a goroutine is given hctx, a hold context taken outside it",
}

// TestVettool builds relockvet and runs it, standalone and as
// go vet -vettool, on a module in a temporary directory that uses a stub of
// the library (the one the analyzer's tests use).
func TestVettool(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "relockvet")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	stub, err := os.ReadFile("../../passes/holdctx/testdata/src/github.com/relock-go/relock/relock.go")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "relock", "go.mod"), "module github.com/relock-go/relock\n\ngo 1.25\n")
	write(t, filepath.Join(dir, "relock", "relock.go"), string(stub))
	write(t, filepath.Join(dir, "m", "go.mod"), "module example.com/m\n\ngo 1.25\n\n"+
		"require github.com/relock-go/relock v0.0.0\n\n"+
		"replace github.com/relock-go/relock => ../relock\n")
	write(t, filepath.Join(dir, "m", "m.go"), user)
	mod := filepath.Join(dir, "m")

	for _, c := range [][]string{
		{gobin, "vet", "-vettool=" + bin, "./..."},
		{bin, "./..."},
	} {
		out, err := command(mod, c...).CombinedOutput()
		t.Logf("%s:\n%s", strings.Join(c, " "), out)
		if err == nil {
			t.Errorf("%s: succeeded, want the diagnostics and a failure\n%s", strings.Join(c, " "), out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: output lacks %q\n%s", strings.Join(c, " "), w, out)
			}
		}
		if n := strings.Count(string(out), "m.go:"); n != len(want) {
			t.Errorf("%s: %d diagnostics, want %d\n%s", strings.Join(c, " "), n, len(want), out)
		}
	}
}

func command(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	// No network, no workspace: the temporary module needs nothing but
	// the stub it replaces the library with.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	return cmd
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
