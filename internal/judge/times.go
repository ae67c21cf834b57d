package judge

import "time"

// Earlier returns the earlier of a and b (time.Time has no min). It is
// exported for internal/schedule, whose checks clip spans as the verdict
// does.
func Earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
