package main

import (
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// cleanupBudget bounds how long removing a toxic may wait for the next stage to take what the
// toxic still holds. Toxiproxy removes toxics under the proxy's lock, and a connection whose
// writer has just ended waits for that same lock: a toxic that blocked here would hang the whole
// proxy for good (upstream issues #412 and #558).
const cleanupBudget = 2 * time.Second

// send hands c to the next stage unless the toxic is interrupted first (then it returns false
// and the caller keeps c). A plain `stub.Output <- c` cannot be interrupted, which is how a
// stock toxic deadlocks the proxy when its connection dies during a toxic change.
func send(stub *toxics.ToxicStub, c *stream.StreamChunk) bool {
	select {
	case stub.Output <- c:
		return true
	case <-stub.Interrupt:
		return false
	}
}

// flush delivers chunks in order, then whatever already waits on the stub's input, within
// cleanupBudget. If the next stage does not take them in time its connection is gone (or
// hopelessly stuck): the stub is closed, which ends that connection rather than dropping bytes
// from the middle of a stream.
func flush(stub *toxics.ToxicStub, chunks []*stream.StreamChunk) {
	deadline := time.NewTimer(cleanupBudget)
	defer deadline.Stop()
	put := func(c *stream.StreamChunk) bool {
		select {
		case stub.Output <- c:
			return true
		case <-deadline.C:
			return false
		}
	}
	for _, c := range chunks {
		if !put(c) {
			stub.Close()
			return
		}
	}
	for len(stub.Input) > 0 {
		c := <-stub.Input
		if c == nil {
			stub.Close()
			return
		}
		if !put(c) {
			stub.Close()
			return
		}
	}
}
