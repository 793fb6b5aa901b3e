"""Stub package (tests only)."""
from .base import KVConnectorBase_V1, KVConnectorRole  # as vLLM's __init__ exports them

__all__ = ["KVConnectorBase_V1", "KVConnectorRole"]
