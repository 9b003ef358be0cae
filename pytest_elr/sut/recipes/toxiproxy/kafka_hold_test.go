package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

func request(apiKey int16, body string) []byte {
	b := make([]byte, 4+2+len(body))
	binary.BigEndian.PutUint32(b, uint32(2+len(body)))
	binary.BigEndian.PutUint16(b[4:], uint16(apiKey))
	copy(b[6:], body)
	return b
}

type harness struct {
	toxic *KafkaHoldToxic
	stub  *toxics.ToxicStub
	in    chan *stream.StreamChunk
	out   chan *stream.StreamChunk
}

func start(t *testing.T, apiKey int16) *harness {
	t.Helper()
	h := &harness{toxic: &KafkaHoldToxic{APIKey: apiKey},
		in: make(chan *stream.StreamChunk), out: make(chan *stream.StreamChunk, 100)}
	h.stub = toxics.NewToxicStub(h.in, h.out)
	h.stub.State = h.toxic.NewState()
	go h.stub.Run(&toxics.ToxicWrapper{Toxic: h.toxic, Toxicity: 1})
	return h
}

func (h *harness) send(b []byte) { h.in <- &stream.StreamChunk{Data: b, Timestamp: time.Now()} }

// received collects what reached the output until nothing more comes for a short while.
func (h *harness) received() []byte {
	var got []byte
	for {
		select {
		case c, ok := <-h.out:
			if !ok || c == nil {
				return got
			}
			got = append(got, c.Data...)
		case <-time.After(100 * time.Millisecond):
			return got
		}
	}
}

func (h *harness) remove() {
	if h.stub.InterruptToxic() {
		h.toxic.Cleanup(h.stub)
	}
}

// awaitHeld waits until the toxic reports want requests held (it counts on its own goroutine, after
// the send has returned) or 5 s pass, and returns the last count it read.
func awaitHeld(t *testing.T, toxic *KafkaHoldToxic, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		raw, err := json.Marshal(toxic)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]int64
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if v["held"] == want || time.Now().After(deadline) {
			return v["held"]
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOtherRequestsPass(t *testing.T) {
	h := start(t, 56)
	hb := request(63, "heartbeat")
	h.send(hb)
	if got := h.received(); !bytes.Equal(got, hb) {
		t.Fatalf("heartbeat not passed: %q", got)
	}
}

func TestHeldUntilRemovedThenDeliveredInOrder(t *testing.T) {
	h := start(t, 56)
	first, alter, after := request(18, "apiversions"), request(56, "alter"), request(63, "late")
	h.send(first)
	h.send(append(append([]byte{}, alter...), after[:3]...)) // a request split across reads
	h.send(after[3:])
	if got := h.received(); !bytes.Equal(got, first) {
		t.Fatalf("before the hold: %q", got)
	}
	if n := awaitHeld(t, h.toxic, 1); n != 1 {
		t.Fatalf("held = %d, want 1", n)
	}
	h.remove()
	want := append(append([]byte{}, alter...), after...)
	if got := h.received(); !bytes.Equal(got, want) {
		t.Fatalf("after removal: %q, want %q", got, want)
	}
	if n := awaitHeld(t, h.toxic, 0); n != 0 {
		t.Fatalf("held = %d after removal", n)
	}
}

func TestInterruptKeepsTheHold(t *testing.T) {
	h := start(t, 56)
	h.send(request(56, "alter"))
	if !h.stub.InterruptToxic() { // another toxic added on the link: the chain is rewired
		t.Fatal("interrupt failed")
	}
	go h.stub.Run(&toxics.ToxicWrapper{Toxic: h.toxic, Toxicity: 1})
	if got := h.received(); len(got) != 0 {
		t.Fatalf("released by an interrupt: %q", got)
	}
	h.remove()
	if got := h.received(); !bytes.Equal(got, request(56, "alter")) {
		t.Fatalf("after removal: %q", got)
	}
}

func TestClientGoneStillDelivers(t *testing.T) {
	h := start(t, 56)
	h.send(request(56, "alter"))
	if n := awaitHeld(t, h.toxic, 1); n != 1 {
		t.Fatalf("held = %d, want 1", n)
	}
	close(h.in)
	if got := h.received(); len(got) != 0 {
		t.Fatalf("delivered early: %q", got)
	}
	if n := awaitHeld(t, h.toxic, 0); n != 0 { // the client is gone: nothing is held for it
		t.Fatalf("held = %d after the client left, want 0", n)
	}
	h.remove()
	if got := h.received(); !bytes.Equal(got, request(56, "alter")) {
		t.Fatalf("late delivery: %q", got)
	}
	if !h.stub.Closed() {
		t.Fatal("the server side was not closed after delivery")
	}
}

func TestNotKafkaPassesThrough(t *testing.T) {
	h := start(t, 56)
	junk := []byte("GET / HTTP/1.1\r\n\r\n")
	h.send(junk)
	if got := h.received(); !bytes.Equal(got, junk) {
		t.Fatalf("non-Kafka bytes: %q", got)
	}
}
