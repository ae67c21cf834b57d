package relock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The inspection script lives apart from scripts.go: it reads the layout of
// every lock type and writes nothing.
var (
	//go:embed scripts/inspect.lua
	inspectSrc string

	inspectScript = redis.NewScript(inspectSrc)
)
