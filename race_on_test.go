//go:build race

package relock_test

// raceEnabled: the race detector drops a quarter of sync.Pool puts, so
// allocation budgets are a little looser under it.
const raceEnabled = true
