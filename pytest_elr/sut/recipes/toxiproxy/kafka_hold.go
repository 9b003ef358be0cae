package main

import (
	"encoding/binary"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// maxFrame bounds what is taken for a Kafka request; anything larger means the stream is not
// Kafka framing (or was joined mid-frame), and the connection is passed through untouched.
const maxFrame = 64 << 20

// KafkaHoldToxic holds back the Kafka requests with one API key until the toxic is removed,
// then delivers them, late. It reads the request framing (int32 size, then int16 api_key) of
// the stream it is attached to, so it belongs on the upstream of a client's proxy.
//
// Once a connection sends a request with APIKey, it and every later request on that
// connection are held, so the server still sees each connection's requests in order (a
// client matches responses to requests by order). Other connections flow freely: a Kafka
// broker sends AlterPartition (56) on a channel of its own, so holding it leaves the
// heartbeats (63) and the metadata fetches alone and the broker stays unfenced. That is
// KIP-903's race, which a delay of the whole link cannot stage.
//
// A connection the client closes while requests are held stays open towards the server
// until the toxic is removed: the held requests still arrive, as a late packet would.
type KafkaHoldToxic struct {
	APIKey int16        `json:"api_key"`
	held   atomic.Int64 // requests with APIKey held now on connections still open
}

type holdState struct {
	buf         []byte                // bytes of a request not yet complete
	out         []*stream.StreamChunk // requests let through, not yet handed on
	held        []*stream.StreamChunk // held requests, in arrival order
	heldKey     int64                 // how many of them carry APIKey and count in held
	holding     bool
	passthrough bool // the stream is not Kafka framing: pass it as it comes
	eof         bool // the client closed its side while requests were held
}

func (t *KafkaHoldToxic) NewState() interface{} { return new(holdState) }

// MarshalJSON shows the attribute and how many requests are held, so a test can await the hold.
func (t *KafkaHoldToxic) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]int64{"api_key": int64(t.APIKey), "held": t.held.Load()})
}

func (t *KafkaHoldToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*holdState)
	for {
		for len(st.out) > 0 { // passed requests not yet handed on (an interrupt came first)
			if !send(stub, st.out[0]) {
				return
			}
			st.out = st.out[1:]
		}
		if st.eof {
			<-stub.Interrupt // nothing more will come; wait to be removed (Cleanup delivers)
			return
		}
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				if st.holding {
					// The client gave up (a timeout, a crash): its requests still arrive on
					// removal, but no longer count as held for it.
					t.held.Add(-st.heldKey)
					st.heldKey = 0
					st.eof = true
					continue
				}
				if len(st.buf) > 0 {
					st.out = append(st.out, chunk(st.buf))
					st.buf = nil
				}
				for len(st.out) > 0 {
					if !send(stub, st.out[0]) {
						return
					}
					st.out = st.out[1:]
				}
				stub.Close()
				return
			}
			st.out = append(st.out, t.take(st, c.Data)...)
		}
	}
}

// take adds bytes read from the client and returns what may be forwarded now.
func (t *KafkaHoldToxic) take(st *holdState, data []byte) []*stream.StreamChunk {
	st.buf = append(st.buf, data...)
	var out []*stream.StreamChunk
	for len(st.buf) > 0 {
		if st.passthrough {
			out = append(out, chunk(st.buf))
			st.buf = nil
			break
		}
		if len(st.buf) < 6 {
			break
		}
		size := int64(int32(binary.BigEndian.Uint32(st.buf)))
		if size < 2 || size > maxFrame {
			st.passthrough = true
			continue
		}
		if int64(len(st.buf)) < 4+size {
			break
		}
		frame := chunk(st.buf[:4+size])
		st.buf = st.buf[4+size:]
		key := int16(binary.BigEndian.Uint16(frame.Data[4:6]))
		if key == t.APIKey {
			st.holding = true
			st.heldKey++
			t.held.Add(1)
		}
		if st.holding {
			st.held = append(st.held, frame)
		} else {
			out = append(out, frame)
		}
	}
	return out
}

// Cleanup runs when the toxic is removed: deliver what was held, in order, then any partial
// request; close the connection if its client has gone.
func (t *KafkaHoldToxic) Cleanup(stub *toxics.ToxicStub) {
	st := stub.State.(*holdState)
	pending := append(st.out, st.held...)
	if len(st.buf) > 0 {
		pending = append(pending, chunk(st.buf))
	}
	t.held.Add(-st.heldKey)
	st.out, st.held, st.buf, st.heldKey, st.holding = nil, nil, nil, 0, false
	flush(stub, pending)
	if st.eof {
		stub.Close()
	}
}

func chunk(b []byte) *stream.StreamChunk {
	return &stream.StreamChunk{Data: append([]byte(nil), b...), Timestamp: time.Now()}
}
