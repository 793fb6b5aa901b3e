"""Stub of vllm.distributed.kv_events (fields as vLLM 0181ea31 declares them; vLLM's are
msgspec Structs, these are frozen dataclasses: equal and hashable alike). Tests only."""
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional


class KVCacheEvent:
    pass


@dataclass(frozen=True)
class BlockStored(KVCacheEvent):
    block_hashes: list
    parent_block_hash: Optional[Any]
    token_ids: list
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str]
    lora_name: Optional[str]
    extra_keys: Optional[list] = None
    group_idx: Optional[int] = None

    def __hash__(self):
        return hash((tuple(self.block_hashes), self.parent_block_hash, tuple(self.token_ids), self.block_size,
                     self.lora_id, self.medium, self.group_idx))


@dataclass(frozen=True)
class BlockRemoved(KVCacheEvent):
    block_hashes: list
    medium: Optional[str]
    group_idx: Optional[int] = None

    def __hash__(self):
        return hash((tuple(self.block_hashes), self.medium, self.group_idx))


@dataclass(frozen=True)
class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventAggregator:
    """Counts each event over the workers; the common ones are those every worker sent."""

    def __init__(self, num_workers):
        if num_workers <= 0:
            raise ValueError("num_workers must be greater than zero.")
        self._count = Counter()
        self._workers = num_workers

    def add_events(self, events):
        self._count.update(events)

    def get_common_events(self):
        return [e for e, n in self._count.items() if n == self._workers]

    def get_all_events(self):
        return list(self._count.elements())

    def clear_events(self):
        self._count.clear()

    def increment_workers(self, count=1):
        self._workers += count

    def reset_workers(self):
        self._workers = 1

    def get_number_of_workers(self):
        return self._workers


class KVConnectorKVEvents(ABC):
    @abstractmethod
    def add_events(self, events): ...

    @abstractmethod
    def aggregate(self): ...

    @abstractmethod
    def increment_workers(self, count=1): ...

    @abstractmethod
    def get_all_events(self): ...

    @abstractmethod
    def get_number_of_workers(self): ...

    @abstractmethod
    def clear_events(self): ...

    def merge(self, other):
        self.add_events(other.get_all_events())
        return self
