"""Consumers: replay a sink's output (storage files, Kafka messages) into MySQL."""
