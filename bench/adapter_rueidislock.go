package bench

import (
	"context"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

func rueidislockLibrary() Library {
	return Library{
		Name: "rueidislock",
		Strategy: "client-side-caching invalidations wake waiters; KeyMajority 1 and NoLoopTracking " +
			"as its README says for one Redis >= 7.0.5; 5 s validity, extended every 2.5 s",
		New: func(addr, prefix string, c *Counter) (Locker, error) {
			l, err := rueidislock.NewLocker(rueidislock.LockerOption{
				ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
				KeyPrefix:      prefix + "rueidislock",
				KeyMajority:    1,
				NoLoopTracking: true,
				ClientBuilder: func(opt rueidis.ClientOption) (rueidis.Client, error) {
					rc, err := rueidis.NewClient(opt)
					if err != nil || c == nil {
						return rc, err
					}
					return countingRueidis{Client: rc, c: c}, nil
				},
			})
			if err != nil {
				return nil, err
			}
			return rueidisLocker{l}, nil
		},
	}
}

type rueidisLocker struct{ l rueidislock.Locker }

func (r rueidisLocker) Lock(ctx context.Context, name string) (Unlocker, error) {
	_, cancel, err := r.l.WithContext(ctx, name)
	if err != nil {
		return nil, err
	}
	return rueidisHold(cancel), nil
}

func (r rueidisLocker) Close() error {
	r.l.Close()
	return nil
}

// rueidisHold is the CancelFunc WithContext returned: calling it deletes the
// key and waits until that is done.
type rueidisHold func()

func (h rueidisHold) Unlock(context.Context) error {
	h()
	return nil
}
