//go:build !race

package relock_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
