package main

import (
	"math/rand"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// LatencyToxic replaces Toxiproxy's own "latency" toxic, with the same attributes and effect:
// each chunk is passed on latency +/- jitter ms after it was read. Ours never blocks where an
// interrupt cannot reach it (see send), and on removal hands on what it holds within a time
// budget (see flush). The stock toxic, interrupted while its connection is dying, waits forever
// for a writer that waits for the proxy's lock: every later API call on that proxy hangs
// (measured here once in 45 suite scenarios: a heal timed out; upstream issue #558).
type LatencyToxic struct {
	Latency int64 `json:"latency"`
	Jitter  int64 `json:"jitter"`
}

type latencyState struct {
	pending *stream.StreamChunk // read, not yet handed on
	due     time.Time
}

func (t *LatencyToxic) GetBufferSize() int    { return 1024 }
func (t *LatencyToxic) NewState() interface{} { return new(latencyState) }

func (t *LatencyToxic) delay() time.Duration {
	d := t.Latency
	if t.Jitter > 0 {
		d += rand.Int63n(2*t.Jitter) - t.Jitter // #nosec G404 -- jitter, not security
	}
	return time.Duration(d) * time.Millisecond
}

func (t *LatencyToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*latencyState)
	for {
		if st.pending == nil {
			select {
			case <-stub.Interrupt:
				return
			case c := <-stub.Input:
				if c == nil {
					stub.Close()
					return
				}
				st.pending, st.due = c, c.Timestamp.Add(t.delay())
			}
		}
		if wait := time.Until(st.due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-stub.Interrupt:
				timer.Stop()
				return // st.pending is kept for the next run, or for Cleanup
			case <-timer.C:
			}
		}
		if !send(stub, st.pending) {
			return
		}
		st.pending = nil
	}
}

// Cleanup runs when the toxic is removed: the delay no longer applies.
func (t *LatencyToxic) Cleanup(stub *toxics.ToxicStub) {
	st := stub.State.(*latencyState)
	var held []*stream.StreamChunk
	if st.pending != nil {
		held = append(held, st.pending)
		st.pending = nil
	}
	flush(stub, held)
}
