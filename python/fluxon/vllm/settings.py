"""FluxonConnector's settings: kv_role and kv_connector_extra_config, checked when the connector
is constructed (as fluxon.sglang checks its extra_config), so that no setting fails later in
vLLM's scheduler or worker. A member of the wrong type or outside its range is refused with a
ValueError naming the member, its value and what is allowed (docs/vllm.md). No vLLM import.

  member            type                    allowed                          default
  socket            str                     non-empty                        $FLUXON_SOCKET (required)
  cluster_id        str                     non-empty                        "fluxon"
  cluster_token     str                     no NUL                           none
  timeout_ms        int                     1..3600000                       the client's (30000)
  log_level         str                     debug, info, warn, error, off    the client's
                                            (any case)
  key_prefix        str                     no NUL, no leading \\x01, every   ""
                                            key <= 1024 bytes
  max_object_bytes  int                     1..1073741824, >= one layer      4194304
  kv_inner_layout   str                     NHD, HND                         "NHD"
  load_async        bool, "true"/"false", 1/0                                false
  save_decode       bool, "true"/"false", 1/0                                false
  hash_block_size   int                     1..block_size, divides it        block_size
  tp_rank           int                     0..tp_size-1                     vLLM's TP rank

kv_role (of kv_transfer_config): kv_producer, kv_consumer, kv_both (vLLM's KVRole,
vllm/config/kv_transfer.py); unset is kv_both. Integers are ints (not bools, floats or
text). Members this connector does not know are logged (a warning) and ignored.
"""
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

logger = logging.getLogger("fluxon.vllm")

KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")  # vLLM's KVRole
LOG_LEVELS = ("debug", "info", "warn", "error", "off")  # the client library's (docs/config.md)
INNER_LAYOUTS = ("NHD", "HND")
MEMBERS = ("socket", "cluster_id", "cluster_token", "timeout_ms", "log_level", "key_prefix", "max_object_bytes",
           "kv_inner_layout", "load_async", "save_decode", "hash_block_size", "tp_rank")
TIMEOUT_MS_MAX = 3_600_000  # as fluxon.sglang
MAX_OBJECT_BYTES_MAX = 1 << 30
MAX_KEY_BYTES = 1024  # FLUXON_MAX_KEY_BYTES (include/fluxon.h)
SHORTEST_HASH_HEX = 16  # an 8-byte block hash (vLLM's builtin hash) as key text: a start-up
# check of the key length may not refuse a model whose hashes are that short; a longer hash
# whose key does not fit is a miss at run time (logged), never an exception


def _fail(name, v, allowed):
    raise ValueError(f"FluxonConnector: kv_connector_extra_config.{name} = {v!r}: {allowed}")


def _int(extra, name, default, lo, hi=None):
    """hi None: no upper bound here (check_spec bounds it by the model)."""
    v = extra.get(name, default)
    if v is None and default is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        _fail(name, v, f"an int in {lo}..{hi}" if hi is not None else f"an int >= {lo}")
    return v


def _str(extra, name, default, nonempty=False):
    v = extra.get(name, default)
    if v is None and default is None:
        return None
    if not isinstance(v, str) or "\0" in v or (nonempty and not v):
        _fail(name, v, "a non-empty string" if nonempty else "a string (no NUL)")
    try:
        v.encode()
    except UnicodeEncodeError:  # a lone surrogate: no bytes to name it by (raised later, unnamed)
        _fail(name, v, "a string of valid Unicode (a lone surrogate cannot be encoded as UTF-8)")
    return v


def _key_prefix(extra):
    v = _str(extra, "key_prefix", "")
    if v.startswith("\x01"):  # FLUXON_TENANT_KEY_MARK: refused as a key's first byte
        _fail("key_prefix", v, "a string (no NUL) that does not start with \\x01")
    return v


def _choice(extra, name, default, allowed, fold=False):
    """fold: matched without regard to case (the client reads log_level so), given back lower."""
    v = extra.get(name, default)
    if v is None and default is None:
        return None
    if not isinstance(v, str) or (v.lower() if fold else v) not in allowed:
        _fail(name, v, "one of " + ", ".join(allowed))
    return v.lower() if fold else v


def _bool(extra, name, default=False):
    v = extra.get(name, default)
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    if type(v) is int and v in (0, 1):  # a JSON 0/1 the earlier code took
        return v == 1
    _fail(name, v, "a boolean (true or false, or 1 or 0)")


@dataclass(frozen=True)
class Settings:
    socket: str
    cluster_id: str = "fluxon"
    cluster_token: Optional[str] = None
    timeout_ms: Optional[int] = None
    log_level: Optional[str] = None
    key_prefix: str = ""
    max_object_bytes: int = 4 << 20
    kv_inner_layout: str = "NHD"
    load_async: bool = False
    save_decode: bool = False
    hash_block_size: Optional[int] = None
    tp_rank: Optional[int] = None
    kv_role: str = "kv_both"

    @classmethod
    def from_config(cls, kv_transfer_config, env=None):
        """The settings of a kv_transfer_config (kv_role, kv_connector_extra_config); raises
        ValueError on the first member that is not allowed."""
        env = os.environ if env is None else env
        role = getattr(kv_transfer_config, "kv_role", None)
        if role is None:
            role = "kv_both"
        if not isinstance(role, str) or role not in KV_ROLES:
            raise ValueError(f"FluxonConnector: kv_transfer_config.kv_role = {role!r}: one of {', '.join(KV_ROLES)}")
        extra = getattr(kv_transfer_config, "kv_connector_extra_config", None)
        if extra is None:
            extra = {}
        if not isinstance(extra, Mapping):
            raise ValueError(f"FluxonConnector: kv_connector_extra_config = {extra!r}: an object (a dict)")
        unknown = sorted(str(k) for k in extra if k not in MEMBERS)
        if unknown:
            logger.warning("FluxonConnector: kv_connector_extra_config members %s are not known and are ignored "
                           "(known: %s)", unknown, ", ".join(MEMBERS))
        socket = extra.get("socket")
        if socket is None or socket == "":
            socket = env.get("FLUXON_SOCKET")
            if not socket:
                raise ValueError("FluxonConnector: kv_connector_extra_config has no \"socket\" (the local owner's "
                                 "unix socket) and FLUXON_SOCKET is not set")
        else:
            socket = _str(extra, "socket", None, nonempty=True)
        return cls(socket=socket,
                   cluster_id=_str(extra, "cluster_id", "fluxon", nonempty=True),
                   cluster_token=_str(extra, "cluster_token", None),
                   timeout_ms=_int(extra, "timeout_ms", None, 1, TIMEOUT_MS_MAX),
                   log_level=_choice(extra, "log_level", None, LOG_LEVELS, fold=True),
                   key_prefix=_key_prefix(extra),
                   max_object_bytes=_int(extra, "max_object_bytes", 4 << 20, 1, MAX_OBJECT_BYTES_MAX),
                   kv_inner_layout=_choice(extra, "kv_inner_layout", "NHD", INNER_LAYOUTS),
                   load_async=_bool(extra, "load_async"),
                   save_decode=_bool(extra, "save_decode"),
                   hash_block_size=_int(extra, "hash_block_size", None, 1),
                   tp_rank=_int(extra, "tp_rank", None, 0),
                   kv_role=role)

    @property
    def load(self):
        return self.kv_role in ("kv_consumer", "kv_both")

    @property
    def save(self):
        return self.kv_role in ("kv_producer", "kv_both")

    def client_kw(self):
        """ClientHolder / Client keyword arguments (None: the client's default)."""
        return {"cluster_id": self.cluster_id, "cluster_token": self.cluster_token, "timeout_ms": self.timeout_ms,
                "log_level": self.log_level}

    def check_spec(self, spec):
        """The members whose range depends on the model (a KVSpec): hash_block_size divides the
        block size, tp_rank is below the TP size, and the longest key fits FLUXON_MAX_KEY_BYTES."""
        bs = spec.block_size
        if self.hash_block_size is not None and (self.hash_block_size > bs or bs % self.hash_block_size):
            _fail("hash_block_size", self.hash_block_size, f"an int in 1..{bs} that divides the block size {bs}")
        if self.tp_rank is not None and self.tp_rank >= spec.tp_size:
            _fail("tp_rank", self.tp_rank, f"an int in 0..{spec.tp_size - 1} (the TP size is {spec.tp_size})")
        key = spec.block_keys("f" * SHORTEST_HASH_HEX, spec.tp_size - 1)[-1]
        n = len(key.encode())
        if n > MAX_KEY_BYTES:
            over = n - MAX_KEY_BYTES
            _fail("key_prefix", self.key_prefix, f"a string of at most {max(0, len(self.key_prefix.encode()) - over)}"
                  f" bytes with this model name: its keys would be {n} bytes, over {MAX_KEY_BYTES}")
