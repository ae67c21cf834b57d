package relock

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runnableScripts returns the names of the files under scripts/ that are
// scripts, not helpers: the ones no file includes.
func runnableScripts(t *testing.T) []string {
	t.Helper()
	paths, err := fs.Glob(scriptFiles, "scripts/*.lua")
	require.NoError(t, err)
	included := make(map[string]bool)
	var names []string
	for _, p := range paths {
		b, err := fs.ReadFile(scriptFiles, p)
		require.NoError(t, err)
		for _, inc := range includes(string(b)) {
			included[inc] = true
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, includeHerePrefix); ok {
				for _, inc := range strings.Fields(rest) {
					included[inc] = true
				}
			}
		}
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(p, "scripts/"), ".lua"))
	}
	var scripts []string
	for _, n := range names {
		if !included[n] {
			scripts = append(scripts, n)
		}
	}
	sort.Strings(scripts)
	require.NotEmpty(t, scripts)
	return scripts
}

// Every script, put together from its header's includes, compiles on a real
// redis-server (SCRIPT LOAD), as the Client sends it.
func TestScriptsLoadOnRedis(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, name := range runnableScripts(t) {
		src, err := scriptSource(scriptFiles, name)
		require.NoError(t, err, name)
		sha, err := rdb.ScriptLoad(ctx, src).Result()
		require.NoError(t, err, "scripts/%s.lua does not compile", name)
		assert.Equal(t, newScript(name).Hash(), sha, name)
	}
}

// luaHelperDef matches a top-level definition of a helper file: a local
// function, or local values (Q_ENTRY, Q_KEPT, ...).
var luaHelperDef = regexp.MustCompile(`(?m)^local (?:function (\w+)|([\w, ]+?)\s*=)`)

// luaComment matches a Lua line comment.
var luaComment = regexp.MustCompile(`--[^\n]*`)

// helperNames returns the names the helper files (the included ones) define
// at their top level.
func helperNames(t *testing.T) map[string]bool {
	t.Helper()
	scripts := make(map[string]bool)
	for _, n := range runnableScripts(t) {
		scripts[n] = true
	}
	paths, err := fs.Glob(scriptFiles, "scripts/*.lua")
	require.NoError(t, err)
	names := make(map[string]bool)
	for _, p := range paths {
		if scripts[strings.TrimSuffix(strings.TrimPrefix(p, "scripts/"), ".lua")] {
			continue
		}
		b, err := fs.ReadFile(scriptFiles, p)
		require.NoError(t, err)
		for _, m := range luaHelperDef.FindAllStringSubmatch(string(b), -1) {
			for _, n := range strings.Split(m[1]+","+m[2], ",") {
				if n = strings.TrimSpace(n); n != "" {
					names[n] = true
				}
			}
		}
	}
	require.NotEmpty(t, names)
	return names
}

// A helper is defined before the first line that calls it, in every script
// as put together: a local that comes later, or never, is read as a global,
// which Redis refuses only when the line runs. This is what a wrong or
// missing include line does; SCRIPT LOAD does not see it.
func TestScriptHelpersDefinedBeforeUse(t *testing.T) {
	helpers := helperNames(t)
	for _, name := range runnableScripts(t) {
		src, err := scriptSource(scriptFiles, name)
		require.NoError(t, err, name)
		code := luaComment.ReplaceAllString(src, "")
		defined := make(map[string]int)
		for _, m := range luaHelperDef.FindAllStringSubmatchIndex(code, -1) {
			def := code[m[0]:m[1]]
			for n := range helpers {
				if _, ok := defined[n]; !ok && regexp.MustCompile(`\b`+n+`\b`).MatchString(def) {
					defined[n] = m[0]
				}
			}
		}
		for n := range helpers {
			use := regexp.MustCompile(`(?:^|[^\w.:])` + n + `\s*[(\[]|\b` + n + `\b`)
			if !isConstName(n) {
				use = regexp.MustCompile(`(?:^|[^\w.:])` + n + `\s*\(`)
			}
			loc := use.FindStringIndex(code)
			if loc == nil {
				continue
			}
			at, ok := defined[n]
			assert.True(t, ok && at <= loc[0], "scripts/%s.lua: %s is called before any include defines it", name, n)
		}
	}
}

// isConstName reports whether n is a constant's name (Q_ENTRY): one that is
// read, not called.
func isConstName(n string) bool { return strings.ToUpper(n) == n }

// scriptSource puts a file after the files it includes, transitively, in
// the order the headers name them, each once; a missing file or a cycle is
// a clear error, not a panic.
func TestScriptSourceIncludes(t *testing.T) {
	files := fstest.MapFS{
		"scripts/a.lua":     {Data: []byte("-- a\nA\n")},
		"scripts/b.lua":     {Data: []byte("-- include: a\n-- b\nB\n")},
		"scripts/c.lua":     {Data: []byte("-- include: a\nC\n")},
		"scripts/main.lua":  {Data: []byte("-- include: b c\n-- main\nMAIN\n-- include: not-a-header-line\n")},
		"scripts/loop.lua":  {Data: []byte("-- include: loop2\n")},
		"scripts/loop2.lua": {Data: []byte("-- include: loop\n")},
		"scripts/bad.lua":   {Data: []byte("-- include: a missing\n")},
	}
	src, err := scriptSource(files, "main")
	require.NoError(t, err)
	assert.Equal(t, "-- a\nA\n-- include: a\n-- b\nB\n-- include: a\nC\n-- include: b c\n-- main\nMAIN\n-- include: not-a-header-line\n", src)

	src, err = scriptSource(files, "a", "c", "main") // the explicit form: helpers named first
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(src, "A\n"), "a helper comes once")

	_, err = scriptSource(files, "loop")
	assert.ErrorIs(t, err, errScriptInclude)
	_, err = scriptSource(files, "bad")
	assert.ErrorIs(t, err, errScriptInclude)
	assert.Contains(t, err.Error(), "missing")
}

// TestNewCallArgv: a call built by newCall carries the whole EVALSHA
// command line, keys boxed by its keySet, and the same line as a call
// written as a literal (which run builds at each send).
// argvText is argv as the text go-redis writes of each argument.
func argvText(argv []any) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = fmt.Sprint(a)
	}
	return out
}

func TestNewCallArgv(t *testing.T) {
	k := lockKeysOf(keyspace{name: "n", base: "relock:{n}"})
	sc := newCall(lockReleaseScript, k.releaseKeys, "owner", "op", "gen")
	// The key count as a string boxed once (numKeysArg): the same bytes
	// on the wire as the int go-redis would format.
	// Keys after the first go by pointer (textArg), the same bytes on the
	// wire: compared as text.
	want := []any{"evalsha", lockReleaseScript.Hash(), "2", k.hash, k.channel, "owner", "op", "gen"}
	assert.Equal(t, argvText(want), argvText(sc.argv))
	assert.Equal(t, []string{k.hash, k.channel}, sc.keys)
	assert.Equal(t, []any{"owner", "op", "gen"}, sc.args)
	literal := scriptCall{script: sc.script, keys: sc.keys, args: sc.args}
	assert.Equal(t, argvText(want), argvText(literal.evalshaArgv()))
	// The script of a test (not made by newScript) is sent by its own SHA.
	stub := redis.NewScript("return 1")
	assert.Equal(t, stub.Hash(), scriptCall{script: stub}.evalshaArgv()[1])
}
