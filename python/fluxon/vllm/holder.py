"""ClientHolder: the connector's one Fluxon client, re-attached after its owner went away."""
import logging
import threading
import time

from ..client import Client
from ..errors import FluxonError, Status, error_for

logger = logging.getLogger("fluxon.vllm")


class ClientHolder:
    """One Client, opened on first use and dropped when the owner goes away; re-opened by a
    later call at most once per retry_s (a call never waits for an owner that is away)."""

    def __init__(self, socket, retry_s=1.0, **client_kw):
        self.socket, self.retry_s, self._kw = socket, retry_s, client_kw
        self._client, self._last_try, self._lock, self._closed = None, 0.0, threading.Lock(), False

    def get(self):
        with self._lock:
            if self._closed:
                raise error_for(Status.ERR_INVALID_ARGUMENT, "fluxon vllm", "closed")
            if self._client is not None and not self._client.closed:
                return self._client
            now = time.monotonic()
            if self._client is None and now - self._last_try < self.retry_s and self._last_try:
                raise error_for(Status.ERR_UNAVAILABLE, "fluxon vllm", f"no owner at {self.socket} (retry "
                                  f"in {self.retry_s - (now - self._last_try):.1f} s)")
            self._last_try = now
            self._client = Client(self.socket, **{k: v for k, v in self._kw.items() if v is not None})
            return self._client

    def failed(self, e):
        """Drops the client after an error that says the owner is gone or restarted."""
        if isinstance(e, FluxonError) and e.status in (Status.ERR_UNAVAILABLE, Status.ERR_STALE):
            with self._lock:
                c, self._client = self._client, None
                self._last_try = time.monotonic()
            if c is not None:
                try:
                    c.close()
                except Exception as ce:
                    logger.debug("fluxon vllm: closing the lost client: %s", ce)

    def close(self):
        with self._lock:
            self._closed = True
            c, self._client = self._client, None
        if c is not None:
            c.close()
