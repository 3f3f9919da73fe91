"""HTTP(S) sink: canal-json change events POSTed in commit order.

- ``config.py``: the sink's options (``OPTIONS``, ``HTTPSinkSettings``, read from the sink URI);
- ``sink.py``: ``HTTPSink``, the driver side (endpoint check, DDL, watermark on commit);
- ``writer.py``: ``HTTPWriter``, the executor side, and ``HTTPPoster``, the POSTs with their
  headers and retries that both sides send.
"""

from sparkcdc.sink.http.config import HTTPSinkSettings, parse_http_sink
from sparkcdc.sink.http.sink import HTTPSink
from sparkcdc.sink.http.writer import HTTPPoster, HTTPWriter

__all__ = ["HTTPPoster", "HTTPSink", "HTTPSinkSettings", "HTTPWriter", "parse_http_sink"]
