package relock

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAppendInt64sReadsAsInt64Slice: an acquire's reply read into the
// caller's buffer is what go-redis's Int64Slice reads — integers, numbers
// sent as strings (its fallback) — and a reply that is not a list of
// numbers, or an error, fails as it does, wrapped and named.
func TestAppendInt64sReadsAsInt64Slice(t *testing.T) {
	reply := func(val any, err error) result {
		cmd := redis.NewCmd(context.Background())
		cmd.SetVal(val)
		cmd.SetErr(err)
		return result{cmd, "acquire"}
	}
	var buf [4]int64
	got, err := reply([]any{int64(1), int64(1767225600000000), int64(2)}, nil).appendInt64s(buf[:0])
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1767225600000000, 2}, got)

	got, err = reply([]any{int64(0), "250"}, nil).appendInt64s(buf[:0])
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 250}, got, "a number as a string, as Int64Slice reads it")

	_, err = reply([]any{int64(0), "x"}, nil).appendInt64s(buf[:0])
	assert.Error(t, err)
	_, err = reply(int64(1), nil).appendInt64s(buf[:0])
	assert.Error(t, err, "not a list")

	boom := errors.New("boom")
	_, err = reply(nil, boom).appendInt64s(buf[:0])
	assert.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "acquire")
}
