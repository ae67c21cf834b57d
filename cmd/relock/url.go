package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// target is a parsed --redis / REDIS_URL: the go-redis client to build and
// how to name the deployment in messages (without its password).
type target struct {
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
	display  string
}

// client builds the go-redis client of the target.
func (t *target) client() redis.UniversalClient {
	switch {
	case t.cluster != nil:
		return redis.NewClusterClient(t.cluster)
	case t.failover != nil:
		return redis.NewFailoverClient(t.failover)
	default:
		return redis.NewClient(t.single)
	}
}

// parseTarget reads the forms the relock command accepts:
//
//	redis://[user:pass@]host:port[/db][?opts]       one server (go-redis ParseURL)
//	rediss://...                                     the same over TLS
//	unix:///path/to/redis.sock                       one server on a socket
//	host:port                                        one server
//	host:port,host:port,...                          a Cluster (seed nodes)
//	redis+cluster://[user:pass@]host:port,...[?opts] a Cluster (rediss+cluster: TLS)
//	redis+sentinel://[user:pass@]host:port,.../master[/db][?opts]
//	                                                 Sentinel (rediss+sentinel: TLS)
//
// For Sentinel, user:pass are the primary's credentials; the Sentinels' own
// go in the query as sentinel_username and sentinel_password.
//
// Its error never shows a password, whole or in part: the parsers' errors
// quote the URL or a piece of it, so a URL with a password that fails is
// parsed again with its passwords masked (redact), and that error, which
// quotes only the masked URL, is the one returned. When the masked URL
// parses, the fault is in a password, and the error says so without
// showing it.
func parseTarget(raw string) (*target, error) {
	raw = strings.TrimSpace(raw)
	t, err := parseURL(raw)
	if err == nil {
		return t, nil
	}
	masked := redact(raw)
	if masked == raw {
		return nil, err
	}
	if _, err := parseURL(masked); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("a password in %s is not valid in a URL (it is not shown): percent-encode its special characters, e.g. %% as %%25, / as %%2F, ? as %%3F, # as %%23", masked)
}

// parseURL is parseTarget on raw as it is: its error may quote raw.
func parseURL(raw string) (*target, error) {
	if raw == "" {
		return nil, errors.New("no Redis given: use --redis URL or set REDIS_URL")
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return hostsTarget(raw)
	}
	// go-redis drops a query pair it cannot unescape, a password too,
	// without a word: refuse it here.
	if _, query, ok := strings.Cut(rest, "?"); ok {
		if _, err := url.ParseQuery(query); err != nil {
			return nil, fmt.Errorf("bad query %q: %w", query, err)
		}
	}
	switch scheme {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return &target{single: o, display: redact(raw)}, nil
	case "redis+cluster", "rediss+cluster":
		return clusterTarget(raw, strings.TrimSuffix(scheme, "+cluster"), rest)
	case "redis+sentinel", "rediss+sentinel":
		return sentinelTarget(raw, strings.TrimSuffix(scheme, "+sentinel"), rest)
	}
	return nil, fmt.Errorf("unknown scheme %q: want redis, rediss, unix, redis+cluster or redis+sentinel", scheme)
}

// hostsTarget reads a URL without a scheme: one host:port is one server,
// several are a Cluster's seed nodes.
func hostsTarget(raw string) (*target, error) {
	hosts, err := hostList(raw)
	if err != nil {
		return nil, err
	}
	if len(hosts) == 1 {
		return &target{single: &redis.Options{Addr: hosts[0]}, display: hosts[0]}, nil
	}
	return &target{cluster: &redis.ClusterOptions{Addrs: hosts}, display: "cluster " + raw}, nil
}

// clusterTarget reads a redis+cluster URL: the hosts after the first go to
// go-redis as addr parameters.
func clusterTarget(raw, scheme, rest string) (*target, error) {
	u, hosts, err := multiHost(scheme, rest)
	if err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("a Cluster URL has no path (a Cluster has only db 0), got %q", u.Path)
	}
	u.Path = ""
	q := u.Query()
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	u.RawQuery = q.Encode()
	o, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, err
	}
	return &target{cluster: o, display: "cluster " + redact(raw)}, nil
}

// sentinelTarget reads a redis+sentinel URL: its path names the primary (and
// its db), its userinfo is the primary's credentials, and the Sentinels'
// own come from the query.
func sentinelTarget(raw, scheme, rest string) (*target, error) {
	u, hosts, err := multiHost(scheme, rest)
	if err != nil {
		return nil, err
	}
	parts := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	if len(parts) == 0 || len(parts) > 2 {
		return nil, errors.New("a Sentinel URL needs the primary's name as its path: redis+sentinel://host:port,host:port/mastername[/db]")
	}
	q := u.Query()
	sentinelUser, sentinelPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	q.Set("master_name", parts[0])
	if len(parts) == 2 {
		q.Set("db", parts[1])
	}
	if u.User != nil {
		q.Set("username", u.User.Username())
		if p, ok := u.User.Password(); ok {
			q.Set("password", p)
		}
		u.User = nil
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	u.Path = ""
	u.RawQuery = q.Encode()
	o, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, err
	}
	o.SentinelUsername, o.SentinelPassword = sentinelUser, sentinelPass
	return &target{failover: o, display: "sentinel " + redact(raw)}, nil
}

// multiHost parses "[userinfo@]h1,h2[/path][?query]" into a URL of scheme on
// the first host, and the list of every host.
func multiHost(scheme, rest string) (*url.URL, []string, error) {
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo := ""
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	hosts, err := hostList(authority)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(scheme + "://" + userinfo + hosts[0] + tail)
	if err != nil {
		return nil, nil, err
	}
	return u, hosts, nil
}

// hostList splits a comma-separated list of host:port.
func hostList(s string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return nil, fmt.Errorf("%q is not host:port", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 || host == "" {
			return nil, fmt.Errorf("%q is not host:port", h)
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no host:port in %q", s)
	}
	return out, nil
}

// redact hides the passwords of a URL, for messages: the userinfo's, and
// the password and sentinel_password query values. It reads a malformed URL
// too, the one that needs it most: the userinfo ends at the last '@' before
// the query, or at the last '@' of all when a '?' comes before every '@'
// (an unescaped '?', '/' or '#' in the password).
func redact(raw string) string {
	out := raw
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	at := strings.LastIndexByte(rest, '@')
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		if before := strings.LastIndexByte(rest[:q], '@'); before >= 0 {
			at = before
		}
	}
	if at >= 0 {
		if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
			out = scheme + user + ":xxxxx" + rest[at:]
		}
	}
	for _, key := range []string{"sentinel_password=", "password="} {
		for i := 0; ; {
			j := strings.Index(out[i:], key)
			if j < 0 {
				break
			}
			start := i + j + len(key)
			end := strings.IndexByte(out[start:], '&')
			if end < 0 {
				end = len(out) - start
			}
			out = out[:start] + "xxxxx" + out[start+end:]
			i = start + len("xxxxx")
		}
	}
	return out
}
