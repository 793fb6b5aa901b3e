"""Stub of vllm.v1.outputs.KVConnectorOutput (tests only)."""
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class KVConnectorOutput:
    finished_sending: Optional[set] = None
    finished_recving: Optional[set] = None
    kv_connector_stats: object = None
    kv_cache_events: object = None
    invalid_block_ids: set = field(default_factory=set)
