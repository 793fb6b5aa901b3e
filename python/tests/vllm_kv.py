"""Test helpers for the vLLM connector: numpy paged KV shaped as vLLM's (one array per layer,
[num_blocks, 2, block_size, heads, dim] or [2, num_blocks, ...]), chained block hashes as
vLLM makes them (bytes), and a request double with the attributes the connector reads."""
import hashlib
from dataclasses import dataclass, field

import numpy as np

from fluxon.vllm.core import KVSpec
from fluxon.vllm.paged import PagedKV

BS, HEADS, DIM, LAYERS = 16, 2, 8, 3
DTYPE = np.float16


def spec(tp_size=1, max_object_bytes=4 << 20, model="org/model-7b", layers=LAYERS):
    return KVSpec(model=model, block_size=BS, dtype="float16", num_layers=layers, kv_heads=HEADS, head_size=DIM,
                  itemsize=2, tp_size=tp_size, layer_names=tuple(f"model.layers.{i}.self_attn" for i in range(layers)),
                  max_object_bytes=max_object_bytes)


def kv_arrays(num_blocks, layout="blocks_first", seed=None, layers=LAYERS):
    shape = (num_blocks, 2, BS, HEADS, DIM) if layout == "blocks_first" else (2, num_blocks, BS, HEADS, DIM)
    if seed is None:
        return [np.zeros(shape, DTYPE) for _ in range(layers)]
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(DTYPE) for _ in range(layers)]


def paged(arrays):
    nb = arrays[0].shape[0] if arrays[0].shape[1] == 2 and arrays[0].shape[0] != 2 else arrays[0].shape[1]
    return PagedKV(arrays, nb, BS, HEADS, DIM, 2)


def block_bytes(arrays, block_id):
    """K then V of block_id in every layer, whatever the layout."""
    out = []
    for a in arrays:
        if a.shape[1] == 2 and a.shape[0] != 2:
            out += [a[block_id, 0].tobytes(), a[block_id, 1].tobytes()]
        else:
            out += [a[0, block_id].tobytes(), a[1, block_id].tobytes()]
    return b"".join(out)


def chain_hashes(tokens, seed=b"none"):
    """vLLM-like block hashes: sha256 of (parent, the block's tokens), full blocks only."""
    out, parent = [], hashlib.sha256(seed).digest()
    for i in range(len(tokens) // BS):
        parent = hashlib.sha256(parent + np.asarray(tokens[i * BS:(i + 1) * BS], np.int64).tobytes()).digest()
        out.append(parent)
    return out


@dataclass
class Req:
    request_id: str
    all_token_ids: list
    num_prompt_tokens: int = 0
    block_hashes: list = field(default_factory=list)

    def __post_init__(self):
        self.num_prompt_tokens = self.num_prompt_tokens or len(self.all_token_ids)
        self.block_hashes = chain_hashes(self.all_token_ids)

    @property
    def num_tokens(self):
        return len(self.all_token_ids)


def prompt(n_tokens, salt=0):
    return [(salt * 7919 + i * 31) % 32000 for i in range(n_tokens)]
