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
	//go:embed scripts/multi_acquire.lua
	multiAcquireSrc string
	//go:embed scripts/multi_release.lua
	multiReleaseSrc string
	//go:embed scripts/red_fence.lua
	redFenceSrc string

	lockAcquireScript      = redis.NewScript(lockAcquireSrc)
	lockReleaseScript      = redis.NewScript(lockReleaseSrc)
	lockRenewScript        = redis.NewScript(lockRenewSrc)
	lockForceReleaseScript = redis.NewScript(lockForceReleaseSrc)
	multiAcquireScript     = redis.NewScript(multiAcquireSrc)
	multiReleaseScript     = redis.NewScript(multiReleaseSrc)
	redFenceScript         = redis.NewScript(redFenceSrc)
)
