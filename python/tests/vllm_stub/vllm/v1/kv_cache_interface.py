"""Stub of vllm.v1.kv_cache_interface: the KV cache config a connector is built with."""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FullAttentionSpec:
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: str
    dtype_size: int = 2  # the stub's stand-in for get_dtype_size(torch dtype)

    @property
    def page_size_bytes(self):
        return 2 * self.block_size * self.num_kv_heads * self.head_size * self.dtype_size


@dataclass(frozen=True)
class MLAAttentionSpec(FullAttentionSpec):
    pass


@dataclass
class KVCacheGroupSpec:
    layer_names: list
    kv_cache_spec: object


@dataclass
class KVCacheConfig:
    num_blocks: int
    kv_cache_tensors: list = field(default_factory=list)
    kv_cache_groups: list = field(default_factory=list)
