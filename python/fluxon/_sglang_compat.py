"""SGLang's HiCacheStorage base, HiCacheStorageConfig, HiCacheStorageExtraInfo and
StorageMetrics: SGLang's own when it can be imported (it needs torch), else minimal
compatible definitions with the same fields and abstract methods, so fluxon.sglang can
be used and tested without SGLang."""
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import List, Optional

try:  # the real base class when SGLang is installed
    from sglang.srt.mem_cache.hicache_storage import (HiCacheStorage, HiCacheStorageConfig,
                                                      HiCacheStorageExtraInfo)
    HAVE_SGLANG = True
except Exception:  # SGLang (or torch) absent: a compatible minimal base
    HAVE_SGLANG = False

    @dataclass
    class HiCacheStorageConfig:
        tp_rank: int = 0
        tp_size: int = 1
        pp_rank: int = 0
        pp_size: int = 1
        attn_cp_rank: int = 0
        attn_cp_size: int = 1
        is_mla_model: bool = False
        enable_storage_metrics: bool = False
        is_page_first_layout: bool = True
        model_name: Optional[str] = None
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False
        extra_config: Optional[dict] = None

    @dataclass
    class HiCacheStorageExtraInfo:
        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[dict] = None

    class HiCacheStorage(ABC):
        """The subset of sglang.srt.mem_cache.hicache_storage.HiCacheStorage a backend implements."""

        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        def batch_set_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        @abstractmethod
        def get(self, key, target_location=None, target_sizes=None): ...

        @abstractmethod
        def batch_get(self, keys, target_locations=None, target_sizes=None): ...

        @abstractmethod
        def set(self, key, value=None, target_location=None, target_sizes=None): ...

        @abstractmethod
        def batch_set(self, keys, values=None, target_locations=None, target_sizes=None): ...

        @abstractmethod
        def exists(self, key): ...

        def batch_exists(self, keys, extra_info=None):
            for i, k in enumerate(keys):
                if not self.exists(k):
                    return i
            return len(keys)

        def clear(self):
            pass

        def get_stats(self):
            return None

try:
    from sglang.srt.observability.metrics_collector import StorageMetrics
except Exception:
    try:
        from sglang.srt.metrics.collector import StorageMetrics
    except Exception:
        @dataclass
        class StorageMetrics:
            prefetch_pgs: list = field(default_factory=list)
            backup_pgs: list = field(default_factory=list)
            prefetch_bandwidth: list = field(default_factory=list)
            backup_bandwidth: list = field(default_factory=list)
