"""Capture: the MySQL replication protocol, binlog events, row decoding, DDL tracking, start points, snapshot reads.

Owns everything that talks to the upstream: the binlog reader and its commit_ts chain, table maps and
row decoders (a C extension; Python compiled per table shape as reference and fallback), the DDL parser, schema catalog and history,
start-point resolution and the snapshot's chunked reads. May import: ``errors``, ``model``,
``config``, ``filter``; never codec, sink, pipeline, server or cli.
"""
