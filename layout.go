package relock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// layoutReplyPrefix starts the error reply of a script that met a layout it
// does not know (layout_common.lua).
const layoutReplyPrefix = "RELOCK_LAYOUT"

// layoutRefusal turns a script's layout refusal into an error wrapping
// ErrIncompatibleLayout, keeping the reply; any other error is returned as
// it is.
func layoutRefusal(err error) error {
	var reply redis.Error
	if err == nil || !errors.As(err, &reply) || !strings.Contains(reply.Error(), layoutReplyPrefix) {
		return err
	}
	return fmt.Errorf("%w (another relock version wrote them; see the README's Rolling upgrades): %w", ErrIncompatibleLayout, err)
}

// layoutOf checks v, the ~v field of the main hash key as a command other
// than a script read it (nil: none), as layout_common.lua does.
func layoutOf(key string, v any) error {
	if v == nil || v == "1" {
		return nil
	}
	return fmt.Errorf("%w (another relock version wrote them; see the README's Rolling upgrades): %s has records of layout %v; this relock reads layout 1",
		ErrIncompatibleLayout, key, v)
}

// hashWithLayout reads field of the main hash key with its ~v, in one
// HMGET: the field's value (nil: none), or ErrIncompatibleLayout.
func hashWithLayout(ctx context.Context, rdb redis.UniversalClient, key, field string) (any, error) {
	v, err := rdb.HMGet(ctx, key, field, "~v").Result()
	if err != nil {
		return nil, err
	}
	if err := layoutOf(key, v[1]); err != nil {
		return nil, err
	}
	return v[0], nil
}

// hashLayout checks the ~v of a main hash as the inspect script read it
// (fields: name, value, ...); typ is its Redis type ("hash", or another
// whose fields are no hash's).
func hashLayout(key string, fields []string, typ string) error {
	if typ != "hash" {
		return nil
	}
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "~v" {
			return layoutOf(key, fields[i+1])
		}
	}
	return nil
}
