package main

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// A real proxy in-process: an upstream that streams as fast as it can, a client that reads a
// little and then stops reading, so the proxy's writer towards it is stuck. Removing a latency
// toxic must still return (the stock toxic waits for the client forever, holding the proxy's
// lock), and the proxy must keep answering.
func TestRemovingLatencyNeverHangsOnAStuckClient(t *testing.T) {
	toxics.Register("latency", new(LatencyToxic))
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	var written atomic.Int64
	go func() {
		for {
			conn, err := upstream.Accept()
			if err != nil {
				return
			}
			go func() {
				block := make([]byte, 64<<10)
				for {
					n, err := conn.Write(block)
					written.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()

	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(server, "p", "127.0.0.1:0", upstream.Addr().String())
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name": "slow", "type": "latency", "stream": "downstream", "attributes": {"latency": 50}}`)); err != nil {
		t.Fatal(err)
	}

	client, err := net.Dial("tcp", proxy.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := io.ReadFull(client, make([]byte, 1<<20)); err != nil { // data flows
		t.Fatal(err)
	}
	// Stop reading and wait until the pipeline is full: the upstream can write no more.
	deadline := time.Now().Add(30 * time.Second)
	for last := int64(-1); ; {
		now := written.Load()
		if now == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream never stopped writing")
		}
		last = now
		time.Sleep(200 * time.Millisecond) // one poll interval of the condition above
	}

	done := make(chan error, 1)
	go func() { done <- proxy.Toxics.RemoveToxic(context.Background(), "slow") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(cleanupBudget + 5*time.Second):
		t.Fatal("removing the latency toxic hung")
	}
	if got := len(proxy.Toxics.GetToxicArray()); got != 0 {
		t.Fatalf("%d toxics left", got)
	}
}
