"""fluxon: Python bindings of libfluxon (ctypes, standard library only; numpy optional).

    import fluxon
    with fluxon.LocalCluster(owners=1) as lc, lc.client() as c:
        c.put("k", b"value")
        assert c.get("k") == b"value"

From the build tree: PYTHONPATH=python python3 -c "import fluxon" (libfluxon.so is found
in build/); elsewhere set FLUXON_LIB=/path/to/libfluxon.so or `make install`.
"""
from ._lib import path as library_path
from ._lib import lib as _clib
from .errors import (Status, status_name, FluxonError, InvalidArgument, NotFound, KeyBeingWritten, KeyExists,
                     GroupRejected, NoSpace, Timeout, Stale, Busy, Unavailable, ProtocolError, AuthError,
                     WrongHandle, Cancelled, LeaseExpired, ConfigError, NoMemory, InternalError,
                     UnknownOutcome)
from .client import Client, PutPlan, ReadPlan, GetHandle, Future, BatchGetResult
from .node import Node, LocalCluster

__version__ = _clib.fluxon_version().decode()

__all__ = ["Client", "Node", "LocalCluster", "PutPlan", "ReadPlan", "GetHandle", "Future", "BatchGetResult",
           "Status", "status_name", "FluxonError", "InvalidArgument", "NotFound", "KeyBeingWritten", "KeyExists",
           "GroupRejected", "NoSpace", "Timeout", "Stale", "Busy", "Unavailable", "ProtocolError", "AuthError",
           "WrongHandle", "Cancelled", "LeaseExpired", "ConfigError", "NoMemory", "InternalError",
           "UnknownOutcome",
           "library_path", "__version__"]
