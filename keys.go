package relock

import (
	"fmt"
	"strings"
)

// maxNameLen bounds a lock name. Redis would take far longer keys, but a name
// this long is a bug in the caller, and every call sends it several times.
const maxNameLen = 64 << 10

// tagEscaper keeps a name from ending or opening the hash tag early: Redis
// Cluster hashes only what stands between the first '{' and the next '}', so
// a raw '}' in a name would put the lock's keys in different slots.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// keyspace derives every key and channel of one named lock. They all share
// the hash tag {escaped name}, so they live in one Cluster slot.
type keyspace struct {
	name string
	base string // prefix:{escaped name}
}

func newKeyspace(prefix, name string) (keyspace, error) {
	if name == "" {
		return keyspace{}, fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	}
	if len(name) > maxNameLen {
		return keyspace{}, fmt.Errorf("%w: lock name is %d bytes, more than %d", ErrInvalidArgument, len(name), maxNameLen)
	}
	return keyspace{name: name, base: prefix + ":{" + tagEscaper.Replace(name) + "}"}, nil
}

// key returns the key with the given suffix ("" for the base key itself).
func (k keyspace) key(suffix string) string {
	if suffix == "" {
		return k.base
	}
	return k.base + ":" + suffix
}

// slotOf returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func slotOf(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// handOverPrefix begins the names of the channels on which releases of the
// lock whose hash key is hash hand it, or wake-ups, over to one Client's
// waiters; handOverChannel is the one of the Client with id clientID. The
// scripts spell the same name, <hash>:w:<client id> (listener_common.lua,
// sema_common.lua), and inspect.Channels reports the prefix.
func handOverPrefix(hash string) string { return hash + ":w:" }

func handOverChannel(hash, clientID string) string { return handOverPrefix(hash) + clientID }
