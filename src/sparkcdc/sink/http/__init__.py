"""HTTP(S) sink: canal-json change events POSTed in commit order."""

from sparkcdc.sink.http.config import HTTPSinkSettings, parse_http_sink
from sparkcdc.sink.http.sink import HTTPPoster, HTTPSink, HTTPWriter

__all__ = ["HTTPPoster", "HTTPSink", "HTTPSinkSettings", "HTTPWriter", "parse_http_sink"]
