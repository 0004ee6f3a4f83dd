# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: the HTTP range source, defined in :mod:`guideloom.read.http`."""

from guideloom.read.http import (
    EXPIRED_STATUS,
    MAX_IDLE_PER_HOST,
    MAX_REDIRECTS,
    MAX_THREADS,
    MIN_RATE,
    REDIRECT_STATUS,
    RETRIES_ENV,
    TIMEOUT_ENV,
    TOKEN_HEADER,
    USER_AGENT,
    WATCH_PERIOD,
    HttpRangeSource,
    clear_http_sources,
    close_connections,
    env_settings,
    http_source,
    run_concurrently,
)

__all__ = [
    "EXPIRED_STATUS",
    "HttpRangeSource",
    "MAX_IDLE_PER_HOST",
    "MAX_REDIRECTS",
    "MAX_THREADS",
    "MIN_RATE",
    "REDIRECT_STATUS",
    "RETRIES_ENV",
    "TIMEOUT_ENV",
    "TOKEN_HEADER",
    "USER_AGENT",
    "WATCH_PERIOD",
    "clear_http_sources",
    "close_connections",
    "env_settings",
    "http_source",
    "run_concurrently",
]
