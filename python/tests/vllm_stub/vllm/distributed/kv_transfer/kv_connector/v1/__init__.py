"""Stub package (tests only)."""
from .base import KVConnectorBase_V1, KVConnectorRole  # noqa: F401  (as vLLM's __init__ exports)
