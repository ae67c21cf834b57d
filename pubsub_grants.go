package relock

// Hand-over grants: a release that hands a lock over addresses the grant to
// one waiter's id on its Client's hand-over channel (see waitQueue). This
// file keeps the ids of this Client's waits that may still be handed a lock,
// the grants that came before their waiter, and releases strays.

import (
	"strconv"
	"strings"
)

// joinHanding registers w by its id on the hand-over channel st, stopping
// the linger of an unused subscription. s.mu is held.
func (s *subscriber) joinHanding(st *chanState, w *waiter) {
	if st.byID == nil {
		st.handing = true
		st.byID = make(map[string]*waiter)
		st.grants = make(map[string]int64)
	}
	if st.idle != nil {
		st.idle.Stop()
		st.idle = nil
	}
	st.byID[w.id] = w
	if token, ok := st.grants[w.id]; ok {
		delete(st.grants, w.id)
		w.granted, w.token = true, token
		s.wake(w)
	}
}

// granted handles a hand-over message, "<waiter id> <token>": the lock may
// be the waiter's (the wait loop decides whether to trust or claim it, see
// grantCheck). A grant whose waiter has not joined yet (the message beat its
// attempt's reply) is kept for it while its wait may still take it. One to
// an id that no longer waits — its wait ended, or Redis came back with an
// older queue that still lists it — is a stray: nobody would use the hold,
// so it is released at once (stray runs the abandon script for that id),
// unless the Client holds that generation, which a duplicate of a grant
// already claimed would name. s.mu is held.
func (s *subscriber) granted(st *chanState, payload string) {
	id, tok, _ := strings.Cut(payload, " ")
	token, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return
	}
	if w := st.byID[id]; w != nil {
		w.granted, w.token = true, token
		s.wake(w)
		return
	}
	if _, ok := s.waiting[id]; ok {
		st.grants[id] = token
		return
	}
	if stray := st.stray; stray.q != nil && strings.HasPrefix(id, s.c.id+":") && !s.closed {
		s.c.goBackground(func() { stray.release(id) })
	}
}

// expect records that a wait of this Client may be handed a lock under id,
// from before its first attempt until settle.
func (s *subscriber) expect(id string) {
	s.mu.Lock()
	s.waiting[id] = struct{}{}
	s.mu.Unlock()
}

// settle ends expect(id) once the wait's hold is recorded or the wait gave
// up, dropping a grant kept for it on channel that nobody took: the hold it
// names is recorded already, or the wait's abandon released it.
func (s *subscriber) settle(channel, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiting, id)
	if st := s.chans[channel]; st != nil && st.grants != nil {
		delete(st.grants, id)
	}
}

// handedOver reports the attempt a hand-over to w amounts to, if one came.
func (w *waiter) handedOver() (attempt, bool) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if !w.granted {
		return attempt{}, false
	}
	return attempt{outcome: acquired, token: w.token}, true
}
