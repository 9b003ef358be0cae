// toxiproxy-server for pytest-elr: the upstream server plus a toxic of ours, kafka_hold, and a
// latency toxic that cannot deadlock the proxy (latency.go).
//
// Built by pytest_elr.sut.images from this module (the Go module proxy is the only source) and
// copied into the node image, where node-init starts it with -host and -port.
package main

import (
	"flag"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

func main() {
	host := flag.String("host", "localhost", "host for the REST API")
	port := flag.String("port", "8474", "port for the REST API")
	flag.Parse()

	toxics.Register("kafka_hold", new(KafkaHoldToxic))
	toxics.Register("latency", new(LatencyToxic)) // replaces the stock one (see latency.go)

	logger := zerolog.New(os.Stdout).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	if lvl, err := zerolog.ParseLevel(os.Getenv("LOG_LEVEL")); err == nil && lvl != zerolog.NoLevel {
		logger = logger.Level(lvl)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	go func() {
		if err := server.Listen(net.JoinHostPort(*host, *port)); err != nil {
			logger.Err(err).Msg("API server stopped")
			os.Exit(1)
		}
	}()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
	if err := server.Shutdown(); err != nil {
		logger.Err(err).Msg("shutdown")
	}
}
