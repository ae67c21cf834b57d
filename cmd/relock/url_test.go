package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A malformed Redis URL never shows its password, on stdout or stderr,
// whole or in part, yet the message still names the problem and, where it
// quotes the URL, shows it with the password masked. The password here is
// s3cretPW; the cases that split it (an unescaped / or ? in it) must not
// show either half.
func TestCLIMalformedURLHidesThePassword(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	for _, tc := range []struct {
		url  string
		want []string // in stderr, after "relock: bad Redis URL: "
	}{
		{"redis://user:s3cretPW@127.0.0.1:badport", []string{`invalid port ":badport"`, "user:xxxxx@127.0.0.1:badport"}},
		{"redis://user:s3cretPW@127.0.0.1:6379/%zz", []string{`invalid URL escape "%zz"`, "user:xxxxx@127.0.0.1:6379"}},
		{"redis://user:s3cretPW@[::1:6379", []string{"missing ']' in host", "user:xxxxx@[::1:6379"}},
		{"redis://user:s3cr%zzetPW@127.0.0.1:6379", []string{"password", "user:xxxxx@127.0.0.1:6379"}},
		{"redis://user:s3cret/PW@127.0.0.1:6379", []string{"password", "user:xxxxx@127.0.0.1:6379"}},
		{"redis://user:s3cret?PW@127.0.0.1:6379", []string{"password", "user:xxxxx@127.0.0.1:6379"}},
		{"redis://127.0.0.1:badport?password=s3cretPW", []string{`invalid port ":badport"`, "password=xxxxx"}},
		{"redis://127.0.0.1:6379?password=s3cr%zzetPW", []string{"unexpected option: password"}}, // go-redis takes none there
		{"rediss+cluster://user:s3cretPW@127.0.0.1:1,127.0.0.1:2/%zz", []string{`invalid URL escape "%zz"`, "user:xxxxx@127.0.0.1:1"}},
		{"redis+sentinel://user:s3cretPW@127.0.0.1:badport/mymaster", []string{`"127.0.0.1:badport" is not host:port`}},
		{"redis+sentinel://user:s3cretPW@127.0.0.1:26379/my%zzmaster", []string{`invalid URL escape "%zz"`, "user:xxxxx@127.0.0.1:26379"}},
		{"redis+sentinel://user:s3cr%zzetPW@127.0.0.1:26379/mymaster", []string{"password", "user:xxxxx@127.0.0.1:26379"}},
		{"redis+sentinel://127.0.0.1:26379/mymaster?sentinel_password=s3cr%zzetPW", []string{"password", "sentinel_password=xxxxx"}},
		{"redis+sentinel://user:s3cretPW@[::1:26379/mymaster", []string{`"[::1:26379" is not host:port`}},
		{"user:s3cretPW@127.0.0.1:6379", []string{"is not host:port", "user:xxxxx@127.0.0.1:6379"}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			r := relockCmd(t, "", "--redis", tc.url, "--timeout", "2s", "inspect", "x")
			t.Logf("%s", r.stderr)
			assert.Equal(t, 2, r.code)
			assert.Empty(t, r.stdout)
			for _, part := range []string{"s3cret", "etPW", "s3cr"} {
				assert.NotContains(t, r.stderr, part, "the password shows")
			}
			assert.True(t, strings.HasPrefix(r.stderr, "relock: bad Redis URL: "), "stderr %q", r.stderr)
			for _, w := range tc.want {
				assert.Contains(t, r.stderr, w)
			}
		})
	}
}
