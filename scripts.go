package relock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Every script is a file of its own under scripts/, whose header names its
// KEYS, ARGV and return values. redis.Script runs EVALSHA and falls back to
// EVAL when the server does not know the script yet (NOSCRIPT), so the source
// crosses the network once per server.
var (
	//go:embed scripts/acquire_common.lua
	acquireCommonSrc string
	//go:embed scripts/release_common.lua
	releaseCommonSrc string
	//go:embed scripts/lock_acquire.lua
	lockAcquireSrc string
	//go:embed scripts/lock_release.lua
	lockReleaseSrc string
	//go:embed scripts/lock_renew.lua
	lockRenewSrc string
	//go:embed scripts/lock_force_release.lua
	lockForceReleaseSrc string
	//go:embed scripts/lock_abandon.lua
	lockAbandonSrc string
	//go:embed scripts/queue_common.lua
	queueCommonSrc string
	//go:embed scripts/multi_acquire.lua
	multiAcquireSrc string
	//go:embed scripts/multi_release.lua
	multiReleaseSrc string
	//go:embed scripts/red_fence.lua
	redFenceSrc string

	//go:embed scripts/fair_common.lua
	fairCommonSrc string
	//go:embed scripts/fair_acquire.lua
	fairAcquireSrc string
	//go:embed scripts/fair_release.lua
	fairReleaseSrc string
	//go:embed scripts/fair_abandon.lua
	fairAbandonSrc string
	//go:embed scripts/fair_force_release.lua
	fairForceReleaseSrc string

	//go:embed scripts/rw_common.lua
	rwCommonSrc string
	//go:embed scripts/rw_read_acquire.lua
	rwReadAcquireSrc string
	//go:embed scripts/rw_write_acquire.lua
	rwWriteAcquireSrc string
	//go:embed scripts/rw_release.lua
	rwReleaseSrc string
	//go:embed scripts/rw_renew.lua
	rwRenewSrc string
	//go:embed scripts/rw_abandon.lua
	rwAbandonSrc string
	//go:embed scripts/rw_force_release.lua
	rwForceReleaseSrc string
	//go:embed scripts/rw_state.lua
	rwStateSrc string

	// queue_common uses release_common's end_hold.
	queueCommonPrelude = releaseCommonSrc + queueCommonSrc

	// The scripts that queue or hand over (see queue_common.lua) share its
	// helpers, which use acquire_common's token and release_common's latch.
	lockAcquireScript      = redis.NewScript(acquireCommonSrc + queueCommonPrelude + lockAcquireSrc)
	lockReleaseScript      = redis.NewScript(acquireCommonSrc + queueCommonPrelude + lockReleaseSrc)
	lockAbandonScript      = redis.NewScript(acquireCommonSrc + queueCommonPrelude + lockAbandonSrc)
	lockRenewScript        = redis.NewScript(lockRenewSrc)
	lockForceReleaseScript = redis.NewScript(acquireCommonSrc + queueCommonPrelude + lockForceReleaseSrc)

	// The fair_* scripts share their helpers: fair_common is prepended.
	fairAcquireScript      = redis.NewScript(fairCommonSrc + acquireCommonSrc + fairAcquireSrc)
	fairReleaseScript      = redis.NewScript(fairCommonSrc + releaseCommonSrc + fairReleaseSrc)
	fairAbandonScript      = redis.NewScript(fairCommonSrc + fairAbandonSrc)
	fairForceReleaseScript = redis.NewScript(fairCommonSrc + fairForceReleaseSrc)

	// The rw_* scripts share their helpers: rw_common is prepended.
	rwReadAcquireScript  = redis.NewScript(rwCommonSrc + acquireCommonSrc + rwReadAcquireSrc)
	rwWriteAcquireScript = redis.NewScript(rwCommonSrc + acquireCommonSrc + rwWriteAcquireSrc)
	rwReleaseScript      = redis.NewScript(rwCommonSrc + releaseCommonSrc + rwReleaseSrc)
	rwRenewScript        = redis.NewScript(rwCommonSrc + rwRenewSrc)
	rwAbandonScript      = redis.NewScript(rwCommonSrc + rwAbandonSrc)
	rwForceReleaseScript = redis.NewScript(rwCommonSrc + rwForceReleaseSrc)
	rwStateScript        = redis.NewScript(rwCommonSrc + rwStateSrc)

	multiAcquireScript = redis.NewScript(acquireCommonSrc + multiAcquireSrc)
	multiReleaseScript = redis.NewScript(acquireCommonSrc + queueCommonPrelude + multiReleaseSrc)
	redFenceScript     = redis.NewScript(redFenceSrc)
)
