package a

import (
	"context"
	"testing"

	"github.com/relock-go/relock"
)

// Tests often try a lock they expect not to get: not reported in _test.go
// files unless -testfiles is set.
func TestBusy(t *testing.T) {
	var l *relock.Lock
	_, err := l.TryLock(context.Background(), 0, 0)
	if err == nil {
		t.Fatal("got a lock that is held")
	}
	l.Lock(nil)
}
