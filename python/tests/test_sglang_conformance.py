"""FluxonStore driven exactly as a pinned SGLang revision drives an L3 backend, against a
real master and two owners (one per TP rank). This shows conformance to that revision's
calls, not a run inside SGLang (SGLang needs torch and a GPU; it cannot be installed here).

Pinned revision: SGLang a10a24e9, the upstream baseline restored verbatim in
noob512/sglang_fluxon commit 19499d41a01b758a2914ed4aa47c10668afbd88b ("Restore upstream
SGLang baseline a10a24e9"). Paths below are relative to python/sglang/srt/ there:
  CC = managers/cache_controller.py        BF = mem_cache/storage/backend_factory.py
  HS = mem_cache/hicache_storage.py        HR = mem_cache/hiradix_cache.py
  MU = mem_cache/utils.py                  MP = mem_cache/memory_pool_host.py (hostpool.py)
Each imitated call names its file:line. The controller below is the storage half of
HiCacheController, its prefetch and backup threads' bodies called in order (the threads
add queues, not calls); torch.distributed.all_reduce(MIN) across the TP ranks is a min().
"""
import hashlib
import importlib

import pytest

from fluxon.sglang import HiCacheStorage, HiCacheStorageConfig, HiCacheStorageExtraInfo
from hostpool import HostPool

STORAGE_BATCH_SIZE = 128  # HS:22


def get_hash_str(token_ids, prior_hash=None):
    """MU:106: SHA-256 over the prior page's digest, then each token as 4 bytes little-endian."""
    h = hashlib.sha256()
    if prior_hash:
        h.update(bytes.fromhex(prior_hash))
    for t in token_ids:
        h.update(int(t).to_bytes(4, "little", signed=False))
    return h.hexdigest()


def create_dynamic_backend(storage_config, kwargs):
    """BF:114-150 (StorageBackendFactory.create_backend("dynamic", ...), CC:458)."""
    cfg = storage_config.extra_config
    for f in ["backend_name", "module_path", "class_name"]:  # BF:122
        if f not in cfg:
            raise ValueError(f"Missing required field '{f}' in backend config for 'dynamic' backend")
    cls = getattr(importlib.import_module(cfg["module_path"]), cfg["class_name"])  # BF:27-28
    assert issubclass(cls, HiCacheStorage)  # BF:29
    return cls(storage_config, kwargs)  # BF:145 (kwargs: create_backend's **kwargs, empty at CC:458)


class Op:
    """CC StorageOperation / PrefetchOperation: the fields the storage calls touch."""

    def __init__(self, host_indices, token_ids, last_hash=None, hash_value=None, prefix_keys=None):
        self.host_indices, self.token_ids, self.last_hash = host_indices, token_ids, last_hash
        self.hash_value = hash_value or []
        self.prefix_keys = prefix_keys
        self.completed_tokens = 0
        self.request_id = "req"

    def increment(self, n):
        self.completed_tokens += n
        return True

    def mark_terminate(self):
        pass


class Controller:
    """One TP rank's HiCacheController (CC:209), storage path only."""

    def __init__(self, tp_rank, tp_size, pool, extra_config, model_name, is_mla, prefetch_threshold):
        self.mem_pool_host, self.page_size = pool, pool.page_size
        # CC:564-625 _generate_storage_config (no DP attention, no PP, no CP, no tp_lcm_size)
        self.storage_config = HiCacheStorageConfig(
            tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
            is_mla_model=is_mla, enable_storage_metrics=False,
            is_page_first_layout=pool.layout == "page_first", model_name=model_name,
            tp_lcm_size=None, should_split_heads=False, extra_config=extra_config)
        self.backup_skip = self.storage_config.is_mla_model and self.storage_config.tp_rank != 0  # CC:448-452
        self.storage_backend = create_dynamic_backend(self.storage_config, {})  # CC:458-460
        self.storage_backend.register_mem_pool_host(self.mem_pool_host)  # CC:461
        self.prefetch_threshold = max(prefetch_threshold, self.page_size)  # CC:465
        self.page_get_func, self.page_set_func = self._generic_page_get, self._generic_page_set  # CC:477-478
        if self.storage_config.extra_config.get("interface_v1", 0):  # CC:480-488 (backend "dynamic")
            self.page_get_func, self.page_set_func = self._page_get_zero_copy, self._page_set_zero_copy

    # ---- prefetch (CC:1024-1069 prefetch_thread_func, CC:937-966 _page_transfer) ----
    def storage_hit_query(self, op):  # CC:994-1022
        last_hash, tokens = op.last_hash, op.token_ids
        prefix_keys = op.prefix_keys.copy() if op.prefix_keys else None
        count, hash_value = 0, []
        for start in range(0, len(tokens), self.page_size * STORAGE_BATCH_SIZE):
            batch_tokens = tokens[start:min(start + self.page_size * STORAGE_BATCH_SIZE, len(tokens))]
            batch_hashes = []
            for i in range(0, len(batch_tokens), self.page_size):
                last_hash = get_hash_str(batch_tokens[i:i + self.page_size], last_hash)  # CC:1009
                batch_hashes.append(last_hash)
            extra_info = HiCacheStorageExtraInfo(prefix_keys=prefix_keys)
            hit = self.storage_backend.batch_exists(batch_hashes, extra_info)  # CC:1014
            hash_value.extend(batch_hashes[:hit])
            count += hit * self.page_size
            if hit < len(batch_hashes):
                break
            if prefix_keys:
                prefix_keys += batch_hashes
        return hash_value, count

    def page_transfer(self, op):  # CC:937-966
        prefix_keys = op.prefix_keys
        for i in range(0, len(op.hash_value), STORAGE_BATCH_SIZE):
            batch_hashes = op.hash_value[i:i + STORAGE_BATCH_SIZE]
            batch_host_indices = op.host_indices[i * self.page_size:(i + len(batch_hashes)) * self.page_size]
            prev = op.completed_tokens
            extra_info = HiCacheStorageExtraInfo(prefix_keys=prefix_keys)
            self.page_get_func(op, batch_hashes, batch_host_indices, extra_info)  # CC:955
            if op.completed_tokens != prev + len(batch_hashes) * self.page_size:
                break
            if prefix_keys:
                prefix_keys += batch_hashes

    def _page_get_zero_copy(self, op, hash_values, host_indices, extra_info=None):  # CC:898-913
        results = self.storage_backend.batch_get_v1(hash_values, host_indices, extra_info)  # CC:901
        inc = 0
        for i in range(len(hash_values)):
            if not results[i]:
                break
            inc += self.page_size
        op.increment(inc)

    def _generic_page_get(self, op, hash_values, host_indices, extra_info=None):  # CC:915-935
        dummy = [self.mem_pool_host.get_dummy_flat_data_page() for _ in hash_values]  # CC:917
        page_data = self.storage_backend.batch_get(hash_values, dummy)  # CC:919
        if page_data is None:
            return
        for i in range(len(hash_values)):
            if page_data[i] is None:
                break
            self.mem_pool_host.set_from_flat_data_page(host_indices[i * self.page_size], page_data[i])  # CC:930
            if not op.increment(self.page_size):
                break

    # ---- backup (CC:1193-1208 backup_thread_func, CC:1167-1191 _page_backup) ----
    def backup(self, op):
        if not self.backup_skip:  # CC:1203
            self.page_backup(op)

    def page_backup(self, op):  # CC:1167-1191
        prefix_keys = op.prefix_keys
        for i in range(0, len(op.hash_value), STORAGE_BATCH_SIZE):
            batch_hashes = op.hash_value[i:i + STORAGE_BATCH_SIZE]
            batch_host_indices = op.host_indices[i * self.page_size:(i + len(batch_hashes)) * self.page_size]
            extra_info = HiCacheStorageExtraInfo(prefix_keys=prefix_keys)
            if not self.page_set_func(batch_hashes, batch_host_indices, extra_info):  # CC:1178
                break
            if prefix_keys:
                prefix_keys += batch_hashes
            op.completed_tokens += self.page_size * len(batch_hashes)

    def _generic_page_set(self, hash_values, host_indices, extra_info=None):  # CC:1088-1093
        data = [self.mem_pool_host.get_data_page(host_indices[i * self.page_size])  # CC:1090
                for i in range(len(hash_values))]
        return self.storage_backend.batch_set(hash_values, data)  # CC:1093

    def _page_set_zero_copy(self, hash_values, host_indices, extra_info=None):  # CC:1095-1098
        return all(self.storage_backend.batch_set_v1(hash_values, host_indices, extra_info))  # CC:1097


def prefetch(ranks, tokens, host_indices):
    """CC:1036-1066 on every rank: hit query, all_reduce(MIN) across TP (CC:1042), the
    threshold (CC:1047), hash_value cut to the common hit (CC:1055), then _page_transfer."""
    ops = [Op(host_indices[r], tokens) for r in range(len(ranks))]
    queried = [c.storage_hit_query(op) for c, op in zip(ranks, ops)]
    hit = min(count for _, count in queried)  # torch.distributed.all_reduce(..., MIN)
    if hit < ranks[0].prefetch_threshold:
        return 0, ops
    for c, op, (hv, _) in zip(ranks, ops, queried):
        op.hash_value = hv[:hit // c.page_size]
        op.host_indices = op.host_indices[:hit]
        c.page_transfer(op)
    return hit, ops


@pytest.mark.parametrize("interface_v1", [True, False])
@pytest.mark.parametrize("mla,layout", [(False, "page_first"), (False, "page_first_direct"),
                                        (False, "layer_first"), (True, "page_first")])
def test_fluxon_store_as_sglang_a10a24e9_calls_it(cluster, interface_v1, mla, layout):
    # HR:612-705 parses --hicache-storage-backend-extra-config and pops prefetch_threshold
    # (HR:655) before the controller sees the rest (HR:158, storage_backend_extra_config)
    extra = {"backend_name": "fluxon", "module_path": "fluxon.sglang", "class_name": "FluxonStore",
             "socket": None, "cluster_id": cluster.cluster_id, "cluster_token": cluster.cluster_token}
    if interface_v1:
        extra["interface_v1"] = True
    pools = [HostPool(mla=mla, layout=layout), HostPool(mla=mla, layout=layout)]
    ranks = [Controller(r, 2, pools[r], dict(extra, socket=cluster.socket(r)), "org/model-7b", mla, 4)
             for r in range(2)]
    assert all(type(c.storage_backend).__name__ == "FluxonStore" for c in ranks)
    assert all((c.page_get_func == c._page_get_zero_copy) == interface_v1 for c in ranks)
    ps = pools[0].page_size
    tokens = list(range(1000, 1000 + 10 * ps))  # 10 pages of a request
    hashes, h = [], None
    for i in range(0, len(tokens), ps):
        h = get_hash_str(tokens[i:i + ps], h)
        hashes.append(h)
    for r, p in enumerate(pools):
        for pg in range(10):
            p.fill_page(pg, 100 * r + pg)
    want = [[p.page_bytes(pg) for pg in range(10)] for p in pools]
    # write_storage (CC:1071) after a device->host write: rank 0 backs up 10 pages, rank 1 only 6
    for r, n in ((0, 10), (1, 6)):
        op = Op(pools[r].indices(range(n)), tokens[:n * ps], hash_value=hashes[:n])
        ranks[r].backup(op)
        assert op.completed_tokens == (0 if ranks[r].backup_skip else n * ps)
    # a later request with the same 8-page prefix and 2 new pages: hits are the common prefix
    # over the ranks (MLA: rank 0's copy serves both: 8 pages)
    new = tokens[:8 * ps] + list(range(5000, 5000 + 2 * ps))
    dst = [p.indices(range(20, 30)) for p in pools]
    hit, ops = prefetch(ranks, new, dst)
    common = 8 if mla else 6
    assert hit == common * ps
    for r, (p, op) in enumerate(zip(pools, ops)):
        assert op.completed_tokens == common * ps
        src = 0 if mla else r  # MLA: one copy, written by rank 0
        assert [p.page_bytes(20 + i) for i in range(common)] == want[src][:common]
    # rank 1 backs up the rest: the whole prefix hits on both ranks
    if not mla:
        op = Op(pools[1].indices(range(6, 10)), tokens[6 * ps:10 * ps], hash_value=hashes[6:10])
        ranks[1].backup(op)
        assert op.completed_tokens == 4 * ps
    hit, _ = prefetch(ranks, tokens, [p.indices(range(40, 50)) for p in pools])
    assert hit == 10 * ps
    # a prefetch under the threshold (CC:1047) is revoked: no transfer
    for c in ranks:
        c.prefetch_threshold = 11 * ps
    hit, ops = prefetch(ranks, tokens, [p.indices(range(40, 50)) for p in pools])
    assert hit == 0 and all(op.completed_tokens == 0 for op in ops)
    # /clear_hicache_storage_backend: HR:744 storage_backend.clear() on every rank
    for c in ranks:
        c.storage_backend.clear()
    assert [c.storage_hit_query(Op(None, tokens))[1] for c in ranks] == [0, 0]
    for c in ranks:
        c.storage_backend.close()
