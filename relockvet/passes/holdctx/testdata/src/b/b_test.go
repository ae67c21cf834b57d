package b

import (
	"context"
	"testing"

	"github.com/relock-go/relock"
)

// With -testfiles, discarded holds are reported in tests too.
func TestBusy(t *testing.T) {
	var l *relock.Lock
	_, err := l.TryLock(context.Background(), 0, 0) // want `the hold context returned by l.TryLock is discarded`
	if err == nil {
		t.Fatal("got a lock that is held")
	}
}
