"""The sparkcdc server: HTTP API ``/api/v2``, changefeed service and the lease-based scheduler."""
