"""pytest-elr: chaos testing of Kafka's replication protocol (KIP-966 ELR, KIP-903)."""

__version__ = "0.1.0"
