"""Replica-task admission of fluxon.sglang.FluxonStore: which backed-up pages the owner
also copies to a CPU owner (node_role remote_cache; FLUXON_PUT_OPT_MAKE_REPLICA_TASK).

extra_config "replica_task" is a policy name or {"policy": ..., options}:
  "off"                     (default) no copy; the owner's write-backs still demote cold pages
  "eager_all"               every backed-up page
  "prefix_end_depth_ratio"  a page group is copied when it ends within depth_limit pages of
                            the prompt's start and its branch is admitted: options
                            depth_limit (pages, 0 = no limit, default 288), admission_ratio
                            (0..1, default 1.0: the share of branches admitted, decided by
                            a hash of the page at anchor_pages, default 1, from the start).
                            It needs SGLang to pass the prefix's keys
                            ("hicache_storage_pass_prefix_keys": true): without them a page's
                            depth is unknown and nothing is copied.

SGLang backs up one radix node per operation, in calls of up to 128 pages; each call is
one group here (all of its pages copied or none). The decision hashes page keys without
the TP rank, so every rank decides alike and a page's TP cohort is copied whole.
"""
import hashlib

POLICIES = ("off", "eager_all", "prefix_end_depth_ratio")
_OPTIONS = {"policy", "depth_limit", "admission_ratio", "anchor_pages"}


def _fraction(s):
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "big") / float(1 << 64)


class ReplicaAdmission:
    def __init__(self, cfg):
        cfg = {"policy": cfg} if isinstance(cfg, str) or cfg is None else cfg
        if not isinstance(cfg, dict):
            raise ValueError(f"FluxonStore: extra_config['replica_task'] is {cfg!r}: a policy name or an object")
        unknown = sorted(set(cfg) - _OPTIONS)
        if unknown:
            raise ValueError(f"FluxonStore: extra_config['replica_task'] has unknown members {unknown} "
                             f"(known: {sorted(_OPTIONS)})")
        self.policy = cfg.get("policy") or "off"
        if self.policy not in POLICIES:
            raise ValueError(f"FluxonStore: replica_task policy {self.policy!r} is not one of {list(POLICIES)}")
        self.depth_limit = self._int(cfg, "depth_limit", 288, 0)
        self.anchor_pages = self._int(cfg, "anchor_pages", 1, 1)
        r = cfg.get("admission_ratio", 1.0)
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
            raise ValueError(f"FluxonStore: replica_task admission_ratio is {r!r}: a number in 0..1")
        self.admission_ratio = float(r)
        self.candidate_pages = self.admitted_pages = 0

    @staticmethod
    def _int(cfg, name, default, low):
        v = cfg.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"FluxonStore: replica_task {name} is {v!r}: an int >= {low}")
        return v

    @property
    def active(self):
        return self.policy != "off"

    def admit(self, namespace, page_hashes, extra_info):
        """Whether the pages of one backup call (one group) are copied to a CPU owner."""
        n = len(page_hashes)
        self.candidate_pages += n
        if self.policy == "off":
            ok = False
        elif self.policy == "eager_all":
            ok = True
        else:
            prefix = None if extra_info is None else getattr(extra_info, "prefix_keys", None)
            if prefix is None:
                ok = False  # depth unknown: fail closed
            else:
                depth_ok = self.depth_limit == 0 or len(prefix) + n <= self.depth_limit
                path = list(prefix) + list(page_hashes)
                if len(path) < self.anchor_pages:
                    branch_ok = True
                else:
                    branch_ok = _fraction(f"{namespace}_{path[self.anchor_pages - 1]}") < self.admission_ratio
                ok = depth_ok and branch_ok
        self.admitted_pages += n if ok else 0
        return ok
