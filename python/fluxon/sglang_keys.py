"""The object keys of fluxon.sglang.FluxonStore: what a key says about its bytes.

    <namespace>_<page hash>_<part>_<tp_rank>_<tp_size>

* namespace  [<extra_backend_tag>_]<model>.<digest>: the served model name ('/' -> '-')
  and 12 hex digits of SHA-256 over everything that decides the bytes of a page and
  is the same on every rank of one deployment: the model name, the host pool's dtype,
  the page size in tokens, the byte order of one object (below), MLA or not, the bytes
  of one token of one layer of one object on a rank, the pipeline and attention
  context parallel sizes. Two deployments (or one restarted with another
  --hicache-mem-layout, dtype or page size) never read each other's pages, and clear()
  deletes exactly its namespace.
* part       MHA: "k" and "v", the two objects of a page (one atomic group); MLA: "kv",
  the one object every rank shares. With pipeline parallelism ".pp<pp_rank>" follows,
  with attention context parallelism ".cp<attn_cp_rank>".
* _<tp_rank>_<tp_size>  the TP cohort suffix of include/fluxon.h ("Key grammar: TP
  cohorts"): keys that differ only in it are one cohort, which the master places on one
  CPU owner (remote_cache) when it copies them there. MLA: "_0_1" (one copy for all
  ranks, written by rank 0 only, as SGLang does).

Byte order of one object, the digest's "order" (from SGLang's host pool formulas): MHA
page_first is token-major (token, layer, head, dim); page_first_direct and layer_first
are layer-major (layer, token, head, dim: layer_first gathers the layers' pieces in
order); page_head is head-major (head, token, layer, dim); MLA the same without heads.
Layouts of one order share pages; the others never meet.
"""
import hashlib
import json

KEY_VERSION = "fluxon-sglang-1"

_ORDER = {"page_first": "token", "page_first_direct": "layer", "layer_first": "layer", "page_head": "head"}


def byte_order(layout):
    """The byte order of one object in a host layout (the layout's own name when unknown)."""
    return _ORDER.get(layout, str(layout))


def dtype_name(dtype):
    """'bfloat16' for torch.bfloat16, numpy.float16 or their names."""
    s = str(getattr(dtype, "name", None) or dtype)
    return s[6:] if s.startswith("torch.") else s


def parse_cohort(key):
    """(cohort id, tp_rank, tp_size) of a key ending "_<rank>_<size>" (1..9 ASCII digits each,
    rank < size, something before them), else None: the grammar of include/fluxon.h that
    the master applies (fx_cohort_len, cache/groups.c)."""
    head, _, size = key.rpartition("_")
    head, _, rank = head.rpartition("_")
    for n in (rank, size):
        if not 1 <= len(n) <= 9 or not n.isascii() or not n.isdigit():
            return None
    if not head:
        return None
    if int(rank) >= int(size):
        return None
    return head, int(rank), int(size)


class KeySpace:
    """Object keys of one rank of one deployment (see the module's docstring)."""

    def __init__(self, *, model, dtype, page_size, layout, mla, row_bytes, tp_rank, tp_size, pp_rank=0,
                 pp_size=1, attn_cp_rank=0, attn_cp_size=1, tag=None):
        if not 0 <= tp_rank < tp_size:
            raise ValueError(f"tp_rank {tp_rank} must be in 0..tp_size-1 (tp_size {tp_size})")
        self.mla = bool(mla)
        self.fields = {"v": KEY_VERSION, "model": model or "", "dtype": dtype_name(dtype),
                       "page_size": int(page_size), "order": byte_order(layout), "mla": self.mla,
                       "row_bytes": int(row_bytes), "pp_size": int(pp_size), "attn_cp_size": int(attn_cp_size)}
        self.digest = hashlib.sha256(json.dumps(self.fields, sort_keys=True).encode()).hexdigest()[:12]
        name = "-".join((model or "model").split("/"))
        self.namespace = (f"{tag}_" if tag is not None else "") + f"{name}.{self.digest}"
        extra = (f".pp{pp_rank}" if pp_size > 1 else "") + (f".cp{attn_cp_rank}" if attn_cp_size > 1 else "")
        if self.mla:
            self.parts = [f"kv{extra}_0_1"]
        else:
            self.parts = [f"k{extra}_{tp_rank}_{tp_size}", f"v{extra}_{tp_rank}_{tp_size}"]

    @property
    def per_page(self):
        """Objects per page: 2 (K, V) for MHA, 1 for MLA."""
        return len(self.parts)

    def prefix(self):
        """Every key of this deployment starts with it."""
        return self.namespace + "_"

    def object_keys(self, page_hashes):
        """The object keys of pages, page by page (K then V)."""
        ns = self.namespace
        return [f"{ns}_{h}_{p}" for h in page_hashes for p in self.parts]
