// Package redis is a stub of go-redis v9 for the analyzer's tests: the
// types and signatures the test cases call, no behaviour.
package redis

import "context"

type IntCmd struct{}

func (c *IntCmd) Result() (int64, error) { return 0, nil }
func (c *IntCmd) Err() error             { return nil }

type StatusCmd struct{}

func (c *StatusCmd) Err() error { return nil }

type Cmdable interface {
	Decr(ctx context.Context, key string) *IntCmd
	Set(ctx context.Context, key string, value any) *StatusCmd
}

type UniversalClient interface {
	Cmdable
}

type Client struct{}

func (c *Client) Decr(ctx context.Context, key string) *IntCmd              { return &IntCmd{} }
func (c *Client) Set(ctx context.Context, key string, value any) *StatusCmd { return &StatusCmd{} }
