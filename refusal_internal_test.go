package relock

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// serverReply is a Redis error reply, as go-redis returns one.
type serverReply string

func (e serverReply) Error() string { return string(e) }
func (serverReply) RedisError()     {}

// The wordings of the servers relock runs on classify alike.
func TestRefusalClassifiesEveryServersWording(t *testing.T) {
	for _, msg := range []string{
		"NOAUTH Authentication required.",
		"ERR Protocol error: unauthenticated multibulk length",
		"WRONGPASS invalid username-password pair or user is disabled.",
		"NOPERM User nohset has no permissions to run the 'hset' command",
		"ERR The user executing the script can't run this command or subcommand script: 78a3, on @user_script:90.",
		"ERR ACL failure in script: User nohset has no permissions to run the 'hset' command script: 78a3, on @user_script:90.",
	} {
		err := refusal(serverReply(msg))
		assert.ErrorIs(t, err, ErrUnavailable, msg)
		var reply serverReply
		assert.True(t, errors.As(err, &reply), "the server's reply is kept: %s", msg)
	}
	for _, msg := range []string{"ERR unknown command", "BUSYKEY Target key name already exists.",
		"ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 78a3, on @user_script:1."} {
		assert.NotErrorIs(t, refusal(serverReply(msg)), ErrUnavailable, msg)
		assert.False(t, transient(serverReply(msg)), msg)
	}
}

// Every refusal by which Redis says nothing about the lock, only about its
// own state, is unavailable and passes: a retry may succeed. A refusal of
// the user is unavailable, and does not pass by waiting.
func TestRefusalOfTheServersStateIsUnavailableAndTransient(t *testing.T) {
	for _, msg := range []string{
		"OOM command not allowed when used memory > 'maxmemory'.",
		"OOM command not allowed when used memory > 'maxmemory'. script: 78a3, on @user_script:90.",
		"ERR Error running script (call to f_78a3): @user_script:90: @user_script: 90: -OOM command not allowed when used memory > 'maxmemory'. ",
		"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
		"READONLY You can't write against a read only replica.",
		"LOADING Redis is loading the dataset in memory",
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
		"CLUSTERDOWN The cluster is down",
		"TRYAGAIN Multiple keys request during rehashing of slot",
		"ASK 3999 127.0.0.1:6381",
		"MOVED 3999 127.0.0.1:6381",
		"NOSCRIPT No matching script. Please use EVAL.",
		"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
		"NOREPLICAS Not enough good replicas to write.",
		"ERR max number of clients reached",
	} {
		err := wrapRedis("acquire", serverReply(msg))
		assert.ErrorIs(t, err, ErrUnavailable, msg)
		assert.True(t, transient(err), msg)
		var reply serverReply
		assert.True(t, errors.As(err, &reply), "the server's reply is kept: %s", msg)
	}
	assert.False(t, transient(wrapRedis("acquire", serverReply("NOPERM User u has no permissions"))))
}
