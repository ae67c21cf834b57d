// Package exampleredis is the setup the example programs share: the Redis
// they run on and the way they tell their story.
package exampleredis

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// Server is the Redis an example runs on: REDIS_URL's, or an embedded
// miniredis.
type Server struct {
	Options *redis.Options
	Where   string // for the story's first line
	mini    *miniredis.Miniredis
	closers []func()
}

// Open returns the Redis of REDIS_URL when it is set, otherwise a new
// embedded miniredis.
func Open() *Server {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			// Not err: it quotes the URL, password and all.
			log.Fatal("REDIS_URL is not a valid redis:// URL (it is not shown: it may hold a password)")
		}
		opts.ContextTimeoutEnabled = true // as the README sets up go-redis
		return &Server{Options: opts, Where: opts.Addr}
	}
	s := Embedded()
	s.Where = "an embedded miniredis (set REDIS_URL to use your Redis)"
	return s
}

// Embedded returns a new embedded miniredis, whatever REDIS_URL says.
func Embedded() *Server {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	// ContextTimeoutEnabled, as the README sets up go-redis: a request ends
	// at its context's deadline, not at a clone's shorter timeouts
	// (clones.go), which a miniredis running a script under a busy
	// machine's load can outlast.
	opts := &redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true}
	return &Server{Options: opts, Where: "an embedded miniredis", mini: m}
}

// Relock returns a new relock Client on a connection of its own, as a
// process of its own would have. Close closes it.
func (s *Server) Relock(opts ...relock.Option) *relock.Client {
	rdb := redis.NewClient(s.Options)
	c := relock.New(rdb, opts...)
	s.closers = append(s.closers, func() { _ = c.Close(); _ = rdb.Close() })
	return c
}

// Elapse lets d pass: it sleeps d and, on miniredis, whose keys expire only
// when its clock is moved, moves that clock by d too.
func (s *Server) Elapse(d time.Duration) {
	time.Sleep(d)
	if s.mini != nil {
		s.mini.FastForward(d)
	}
}

// Close closes the Clients Relock made, then stops an embedded server.
func (s *Server) Close() {
	for _, c := range s.closers {
		c()
	}
	s.closers = nil
	s.Stop()
}

// Stop stops an embedded server at once: its clients fail from then on. It
// does nothing to REDIS_URL's.
func (s *Server) Stop() {
	if s.mini != nil {
		s.mini.Close()
	}
}

// Story prints the lines of an example, each with the time since the story
// began and who speaks.
type Story struct{ start time.Time }

// NewStory prints the title and starts the clock.
func NewStory(title string) *Story {
	fmt.Println(title)
	return &Story{start: time.Now()}
}

// Say prints one line of the story.
func (s *Story) Say(who, format string, args ...any) {
	fmt.Printf("%7.1fms  %-8s %s\n", float64(time.Since(s.start).Microseconds())/1000, who, fmt.Sprintf(format, args...))
}
