"""The sparkcdc server: HTTP API ``/api/v2``, changefeed service and the lease-based scheduler.

Owns the API, the scheduler that claims changefeeds by lease and runs them through ``pipeline``.
May import every layer below it; nothing imports it but ``cli``.
"""
