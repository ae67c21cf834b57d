package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/relock-go/relock"
)

// latchRole is holderproc -kind latch: with role "wait" it waits for the
// CountDownLatch name and prints "opened <unix ns>" when Wait returns; with
// role "count" it reads one line from stdin, counts the latch down and
// prints "counted <unix ns>" (the time just before the CountDown was sent).
func latchRole(c *relock.Client, name, role string) error {
	l := c.CountDownLatch(name)
	switch role {
	case "wait":
		if err := l.Wait(context.Background()); err != nil {
			return err
		}
		fmt.Printf("opened %d\n", time.Now().UnixNano())
	case "count":
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		at := time.Now()
		if err := l.CountDown(context.Background()); err != nil {
			return err
		}
		fmt.Printf("counted %d\n", at.UnixNano())
	default:
		return fmt.Errorf("unknown -role %q (wait or count)", role)
	}
	return nil
}
