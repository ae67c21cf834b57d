package redistest

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CPU returns the CPU time (user + system) the server rdb talks to has
// used, from INFO cpu: benchmarks take its difference over a run to report
// Redis's CPU per operation.
func CPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			sum += s
		}
	}
	return time.Duration(sum * float64(time.Second)), nil
}
