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
	for _, msg := range []string{"ERR unknown command", "BUSY Redis is busy running a script"} {
		assert.NotErrorIs(t, refusal(serverReply(msg)), ErrUnavailable, msg)
	}
}
