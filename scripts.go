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
	//go:embed scripts/lock_acquire.lua
	lockAcquireSrc string
	//go:embed scripts/lock_release.lua
	lockReleaseSrc string
	//go:embed scripts/lock_renew.lua
	lockRenewSrc string
	//go:embed scripts/lock_force_release.lua
	lockForceReleaseSrc string

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

	lockAcquireScript      = redis.NewScript(lockAcquireSrc)
	lockReleaseScript      = redis.NewScript(lockReleaseSrc)
	lockRenewScript        = redis.NewScript(lockRenewSrc)
	lockForceReleaseScript = redis.NewScript(lockForceReleaseSrc)

	// The fair_* scripts share their helpers: fair_common is prepended.
	fairAcquireScript      = redis.NewScript(fairCommonSrc + fairAcquireSrc)
	fairReleaseScript      = redis.NewScript(fairCommonSrc + fairReleaseSrc)
	fairAbandonScript      = redis.NewScript(fairCommonSrc + fairAbandonSrc)
	fairForceReleaseScript = redis.NewScript(fairCommonSrc + fairForceReleaseSrc)
)
