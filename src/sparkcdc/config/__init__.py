"""Changefeed configuration (TiCDC's TOML shape) and sink-URI parsing.

Owns ``ReplicaConfig`` (closed TOML: every key checked), dispatch-rule parsing, URI parsing and redaction.
May import: ``errors``, ``model``, ``filter``; never capture, codec, dispatch, sink or above.
"""
