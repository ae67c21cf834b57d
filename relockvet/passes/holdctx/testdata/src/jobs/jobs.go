// Package jobs stands for another package of the program under analysis.
package jobs

import (
	"context"

	"github.com/relock-go/relock"
)

// Finish is given both the hold and its lock: it may release the hold.
func Finish(ctx context.Context, l *relock.Lock) error { return l.Unlock(ctx) }
