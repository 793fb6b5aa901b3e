"""Node: a master or an owner running on a thread of this process (fluxon_node_start), for
tests and single-host use. The config is the JSON document of the README ("role":
"master" | "owner", ...), given as a dict or a str."""
import ctypes
import json
import os
import tempfile
from collections.abc import Mapping

from .errors import ConfigError, Status, check, config_json, utf8
from ._lib import lib


def _config(config):
    """(the config as a dict, its JSON text as bytes) of a dict or a JSON str; a str that is
    not a JSON object raises ConfigError saying where (as the library's own refusals)."""
    if isinstance(config, Mapping):
        text = config_json(dict(config))
        return json.loads(text), text.encode()  # self.config as the node reads it (tuples as lists)
    if not isinstance(config, str):
        raise TypeError(f"config: a dict or a JSON str, not {type(config).__name__}")
    try:
        text = utf8(config, "config")
        parsed = json.loads(config)
    except json.JSONDecodeError as e:
        raise ConfigError(Status.ERR_CONFIG, "node_start", f"config: not JSON: {e.msg} at line {e.lineno} "
                          f"column {e.colno} (char {e.pos})") from None
    except ValueError as e:  # a lone surrogate
        raise ConfigError(Status.ERR_CONFIG, "node_start", str(e)) from None
    if not isinstance(parsed, dict):
        raise ConfigError(Status.ERR_CONFIG, "node_start", f"config: a JSON object, not {type(parsed).__name__}")
    return parsed, text


class Node:
    def __init__(self, config):
        self.config, text = _config(config)
        p = ctypes.c_void_p()
        check(lib.fluxon_node_start(text, ctypes.byref(p)), "node_start", f"role {self.config.get('role')!r}")
        self._n = p.value

    @property
    def port(self):
        """The TCP port a master listens on (0 for an owner)."""
        return int(lib.fluxon_node_port(self._n)) if self._n else 0

    @property
    def socket(self):
        """An owner's unix socket path (None for a master)."""
        return self.config.get("socket")

    def stop(self):
        if self._n:
            n, self._n = self._n, None
            lib.fluxon_node_stop(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


LOCAL_CLUSTER_MAX_OWNERS = 64  # each maps its own segment in this process


class LocalCluster:
    """A master and n owners in this process, sockets in a private temporary directory:
    with LocalCluster(owners=2) as lc: c = lc.client(0)."""

    def __init__(self, owners=1, cluster_id="fluxon", cluster_token=None, segment_bytes="64MiB",
                 grant_bytes="8MiB", log_level="warn", owner_extra=None, owner_configs=None):
        """owner_extra: config members added to every owner; owner_configs: a list of one
        dict per owner added after it (e.g. [{}, {"node_role": "remote_cache"}])."""
        if isinstance(owners, bool) or not isinstance(owners, int):
            raise TypeError(f"LocalCluster owners: an int, not {type(owners).__name__}")
        if not 1 <= owners <= LOCAL_CLUSTER_MAX_OWNERS:
            raise ValueError(f"LocalCluster owners: {owners} is outside 1..{LOCAL_CLUSTER_MAX_OWNERS}")
        if owner_configs is not None and len(owner_configs) > owners:
            raise ValueError(f"LocalCluster owner_configs: {len(owner_configs)} configs for {owners} owner(s): "
                             "one dict per owner at most")
        self.dir = tempfile.mkdtemp(prefix="fluxon-py-")
        self.cluster_id, self.cluster_token, self.log_level = cluster_id, cluster_token, log_level
        base = {"cluster_id": cluster_id, "log_level": log_level}
        if cluster_token is not None:
            base["cluster_token"] = cluster_token
        self.owners = []
        self.master = Node(dict(base, role="master", listen="127.0.0.1:0"))
        try:
            for i in range(owners):
                cfg = dict(base, role="owner", node_id=f"py{i}", master=f"127.0.0.1:{self.master.port}",
                           socket=os.path.join(self.dir, f"o{i}", "s.sock"), segment_bytes=segment_bytes,
                           reserve={"grant_bytes": grant_bytes})
                cfg.update(owner_extra or {})
                cfg.update((owner_configs or [])[i] if i < len(owner_configs or []) else {})
                self.owners.append(Node(cfg))
        except BaseException:
            self.stop()
            raise

    def socket(self, i=0):
        return self.owners[i].socket

    def client(self, i=0, **kw):
        from .client import Client
        kw.setdefault("log_level", self.log_level)
        return Client(self.socket(i), cluster_id=self.cluster_id, cluster_token=self.cluster_token, **kw)

    def stop(self):
        for o in self.owners:
            o.stop()
        if getattr(self, "master", None):
            self.master.stop()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
