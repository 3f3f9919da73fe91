"""A Confluent-compatible Avro schema registry: durable store, compatibility checks, HTTP server."""
