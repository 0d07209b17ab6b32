"""Kafka transactions (KIP-98): the coordinator on the metadata leader and the markers it writes."""
