"""A Confluent-compatible Avro schema registry: durable store, compatibility checks, HTTP server.

A side service for users without one and for tests. May import: ``errors``, ``services``.
"""
