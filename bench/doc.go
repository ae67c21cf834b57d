// Package bench compares relock with the other Go lock libraries for Redis —
// go-redsync/redsync, bsm/redislock, rueidis/rueidislock — and with a "floor"
// (SET NX PX to acquire, a compare-and-delete script to release: the least a
// correct lock can send), on one Redis, in one run. Beside the floor runs the
// "seed" lock: Redisson's reentrant RLock scripts as the seed documents print
// them (a hash with a count per owner, pexpire, a publishing release; no
// fencing, replay latch or watchdog), the floor for a reentrant lock against
// which relock's uncontended and 64-keys targets are set.
//
// With -overshoot the command measures something else: how late
// each library's blocking Lock returns after a 500 ms deadline while Redis is
// hung, refuses connections, is slow by 1 s or sits behind a half-open
// connection, which error it returns, and whether a lock it failed to get is
// still held once Redis is back (see RunOvershoot).
//
// Every library sits behind the same small Locker interface, is used the way
// its README recommends, and runs the same scenarios in turn, interleaved, so
// that a noisy machine hurts every library alike. Results are reported as
// ratios against the floor. The command is ./bench (go run ./bench).
//
// A "process" is one Locker: its own go-redis or rueidis client and
// connections, and for relock its own Client (subscriber, watchdog), as a
// separate program would have; all of them run in the benchmark's one OS
// process. The headline scenarios give every worker a process of its own;
// the others have goroutines share a few, as goroutines of one program do.
//
// The module is separate from relock's so that the library's go.mod gains
// none of the peers as dependencies.
package bench
