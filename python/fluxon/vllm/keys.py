"""Keys of vLLM blocks in Fluxon (no vLLM import): a block is identified by vLLM's own
prefix-cache block hash; each TP rank stores its shard under

    [<key_prefix>]<model>@tp_rank:<R>@cfg:<digest>@<block hash hex>[@part:<i>]

where <digest> (12 hex) covers what makes two engines' bytes incompatible (KVSpec)."""
import hashlib
import json
from dataclasses import dataclass


def block_hash_hex(h):
    """The key text of a vLLM block hash: bytes as hex, an int as 16 hex digits, a str as is
    (an older vLLM's BlockHashType: its hash_value)."""
    h = getattr(h, "hash_value", h)
    if isinstance(h, (bytes, bytearray)):
        if not h:
            raise ValueError("an empty block hash")
        return bytes(h).hex()
    if isinstance(h, int) and not isinstance(h, bool):
        return format(h & (2 ** 64 - 1), "016x")
    if isinstance(h, str) and h:
        return h
    raise TypeError(f"a block hash is bytes, int or str, not {type(h).__name__}")


def external_block_hash(hex_text):
    """vLLM's ExternalBlockHash of a block hash (as block_hash_hex gives it) in KV events:
    the low 64 bits, big-endian (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, vLLM's default)."""
    return int(hex_text[-16:], 16)


@dataclass(frozen=True)
class KVSpec:
    """What a key promises about the bytes under it. itemsize is the element size in bytes."""
    model: str
    block_size: int
    dtype: str
    num_layers: int
    kv_heads: int
    head_size: int
    itemsize: int
    tp_size: int = 1
    inner: str = "NHD"
    layer_names: tuple = ()
    max_object_bytes: int = 4 << 20
    key_prefix: str = ""

    def __post_init__(self):
        for name in ("block_size", "num_layers", "kv_heads", "head_size", "itemsize", "tp_size", "max_object_bytes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"KVSpec.{name} = {v!r}: a positive int")
        if not self.model or "\0" in self.model:
            raise ValueError(f"KVSpec.model = {self.model!r}: a non-empty name")
        if self.inner not in ("NHD", "HND"):
            raise ValueError(f"KVSpec.inner = {self.inner!r}: NHD or HND")
        if self.layer_names and len(self.layer_names) != self.num_layers:
            raise ValueError(f"KVSpec: {len(self.layer_names)} layer names for {self.num_layers} layers")
        if self.layer_bytes > self.max_object_bytes:
            raise ValueError(f"one layer of one block is {self.layer_bytes} bytes, over max_object_bytes "
                             f"{self.max_object_bytes} (kv_connector_extra_config.max_object_bytes)")

    @property
    def layer_bytes(self):
        """K and V of one block of one layer, bytes."""
        return 2 * self.block_size * self.kv_heads * self.head_size * self.itemsize

    @property
    def parts(self):
        """Objects per block per rank: the fewest that divide the layers evenly and fit."""
        for p in range(1, self.num_layers + 1):
            if self.num_layers % p == 0 and (self.num_layers // p) * self.layer_bytes <= self.max_object_bytes:
                return p
        return self.num_layers  # unreachable: __post_init__ checked one layer fits

    @property
    def layers_per_part(self):
        return self.num_layers // self.parts

    @property
    def part_bytes(self):
        return self.layers_per_part * self.layer_bytes

    @property
    def digest(self):
        d = {"v": 1, "model": self.model, "dtype": self.dtype, "block_size": self.block_size,
             "num_layers": self.num_layers, "kv_heads": self.kv_heads, "head_size": self.head_size,
             "itemsize": self.itemsize, "tp_size": self.tp_size, "inner": self.inner,
             "layer_names": list(self.layer_names), "parts": self.parts}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]

    def block_keys(self, hash_hex, rank):
        """The keys of one rank's shard of one block (its parts, in layer order)."""
        if not 0 <= rank < self.tp_size:
            raise ValueError(f"tp rank {rank} is outside 0..{self.tp_size - 1}")
        base = f"{self.key_prefix}{self.model}@tp_rank:{rank}@cfg:{self.digest}@{hash_hex}"
        if self.parts == 1:
            return [base]
        return [f"{base}@part:{i}" for i in range(self.parts)]
