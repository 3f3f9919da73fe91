"""Changefeed configuration (TiCDC's TOML shape) and sink-URI parsing."""
