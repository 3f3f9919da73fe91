"""Consumers: replay a sink's output (storage files, Kafka messages) into MySQL.

Owns the storage and Kafka replayers (one poll/apply loop for canal-json and Avro). May import:
``errors``, ``model``, ``config``, ``capture`` (value types), ``codec`` (decoders) and ``sink.mysql``
(the applier); never pipeline, server or cli.
"""
