"""Loading libfluxon.so and declaring the C prototypes of include/fluxon.h (ctypes).

The library is found, first match wins:
  1. $FLUXON_LIB: the path of libfluxon.so (or libfluxon.so.0) to load;
  2. the build tree: <repo>/build/libfluxon.so when this package is <repo>/python/fluxon;
  3. an installed prefix: <prefix>/lib/libfluxon.so.0 when this package was installed by
     `make install` under <prefix>/lib/python3/dist-packages/fluxon;
  4. the dynamic loader's search path (libfluxon.so.0, then libfluxon.so).
"""
import ctypes
import os

c_u64 = ctypes.c_uint64
c_u64_p = ctypes.POINTER(ctypes.c_uint64)
c_u32_p = ctypes.POINTER(ctypes.c_uint32)
c_int_p = ctypes.POINTER(ctypes.c_int)
c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)


class PutOptions(ctypes.Structure):
    """struct fluxon_put_options."""
    _fields_ = [
        ("field_mask", ctypes.c_uint64),
        ("reject_if_inflight_same_key", ctypes.c_int),
        ("reject_if_exist_same_key", ctypes.c_int),
        ("write_through", ctypes.c_int),
        ("make_replica_task", ctypes.c_int),
        ("make_replica_task_mask", ctypes.POINTER(ctypes.c_uint8)),
        ("atomic_group_lens", c_u32_p),
        ("n_atomic_groups", ctypes.c_size_t),
        ("lease_id", ctypes.c_uint64),
        ("preferred_sub_cluster", ctypes.c_char_p),
        ("local_first", ctypes.c_int),
        ("pin_ttl_ms", ctypes.c_uint32),  # issue 42
        ("pin_refresh_on_hit", ctypes.c_int),
    ]


OPT_REJECT_IF_INFLIGHT = 1 << 0
OPT_REJECT_IF_EXIST = 1 << 1
OPT_WRITE_THROUGH = 1 << 2
OPT_MAKE_REPLICA_TASK = 1 << 3
OPT_REPLICA_MASK = 1 << 4
OPT_ATOMIC_GROUPS = 1 << 5
OPT_LEASE_ID = 1 << 6
OPT_PREFERRED_SUB_CLUSTER = 1 << 7
OPT_LOCAL_FIRST = 1 << 8
OPT_PIN_TTL = 1 << 9
OPT_PIN_REFRESH_ON_HIT = 1 << 10
PIN_REFRESH_ON_HIT = 0x1  # fluxon_pin flags
PIN_TTL_MAX_MS = 86400000
TENANT_SET_QUOTA = 0x1  # fluxon_tenant_set flags (issue 42 quotas)
TENANT_SET_GUARANTEED = 0x2

PUT_PLAN_MAGIC = 0x4E414C5054555046
READ_PLAN_MAGIC = 0x4E414C5044414552


class GetStartResult(ctypes.Structure):
    """struct fluxon_get_start_result."""
    _fields_ = [
        ("raw_prefix_hit_len", ctypes.c_uint64),
        ("transferable_len", ctypes.c_uint64),
        ("prefix_hit_groups", ctypes.c_uint64),
        ("first_miss_index", ctypes.c_int64),
        ("first_miss_group_index", ctypes.c_int64),
        ("all_hit", ctypes.c_int),
        ("miss_status", ctypes.c_int),
    ]


class SegmentInfo(ctypes.Structure):
    """struct fluxon_segment_info."""
    _fields_ = [
        ("segment_label", ctypes.c_char * 32),
        ("node_id", ctypes.c_char * 64),
        ("write_ptr", ctypes.c_void_p),
        ("read_ptr", ctypes.c_void_p),
        ("len", ctypes.c_uint64),
        ("generation", ctypes.c_uint64),
    ]


_VP = ctypes.c_void_p
_PROTOS = {
    "fluxon_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "fluxon_version": (ctypes.c_char_p, []),
    "fluxon_node_start": (ctypes.c_int, [ctypes.c_char_p, c_void_pp]),
    "fluxon_node_stop": (None, [_VP]),
    "fluxon_node_port": (ctypes.c_uint16, [_VP]),
    "fluxon_client_open": (ctypes.c_int, [ctypes.c_char_p, c_void_pp]),
    "fluxon_client_close": (None, [_VP]),
    "fluxon_client_stats": (ctypes.c_int, [_VP, ctypes.c_char_p, ctypes.c_size_t, c_size_p]),
    "fluxon_client_master_stats": (ctypes.c_int, [_VP, ctypes.c_char_p, ctypes.c_size_t, c_size_p]),
    "fluxon_client_cluster_nodes": (ctypes.c_int, [_VP, ctypes.c_char_p, ctypes.c_size_t, c_size_p]),
    "fluxon_client_ping": (ctypes.c_int, [_VP, ctypes.c_int, c_u64_p]),
    "fluxon_wait_local_segments_ready": (ctypes.c_int, [_VP, ctypes.c_uint32, ctypes.POINTER(SegmentInfo),
                                                        ctypes.c_size_t, c_size_p]),
    "fluxon_put": (ctypes.c_int, [_VP, ctypes.c_char_p, _VP, ctypes.c_uint64, ctypes.POINTER(PutOptions)]),
    "fluxon_get": (ctypes.c_int, [_VP, ctypes.c_char_p, c_void_pp]),
    "fluxon_holder_data": (_VP, [_VP]),
    "fluxon_holder_len": (ctypes.c_uint64, [_VP]),
    "fluxon_holder_release": (None, [_VP]),
    "fluxon_delete": (ctypes.c_int, [_VP, ctypes.c_char_p]),
    "fluxon_batch_exists": (ctypes.c_int, [_VP, c_char_pp, ctypes.c_size_t, c_size_p]),
    "fluxon_prefetch": (ctypes.c_int, [_VP, c_char_pp, ctypes.c_size_t]),
    "fluxon_last_error_message": (ctypes.c_char_p, []),
    "fluxon_lease_grant": (ctypes.c_int, [_VP, ctypes.c_uint64, c_u64_p]),
    "fluxon_pin": (ctypes.c_int, [_VP, c_char_pp, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint32, c_int_p]),
    "fluxon_tenant_set": (ctypes.c_int, [_VP, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32,
                                         ctypes.c_char_p]),
    "fluxon_list_keys": (ctypes.c_int, [_VP, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, _VP, _VP,
                                        c_size_p]),
    "fluxon_local_fast_put_start": (ctypes.c_int, [_VP, c_char_pp, ctypes.c_size_t, ctypes.c_uint64,
                                                   ctypes.POINTER(PutOptions), c_void_pp, c_int_p]),
    "fluxon_local_fast_put_commit": (ctypes.c_int, [_VP, _VP, c_void_pp]),
    "fluxon_put_abort": (ctypes.c_int, [_VP, _VP]),
    "fluxon_future_wait": (ctypes.c_int, [_VP, ctypes.c_uint32]),
    "fluxon_future_poll": (ctypes.c_int, [_VP]),
    "fluxon_future_fd": (ctypes.c_int, [_VP]),
    "fluxon_future_free": (None, [_VP]),
    "fluxon_get_start": (ctypes.c_int, [_VP, c_char_pp, ctypes.c_size_t, ctypes.c_int, c_u32_p, ctypes.c_size_t,
                                        c_void_pp, ctypes.POINTER(GetStartResult)]),
    "fluxon_get_transfer": (ctypes.c_int, [_VP, _VP, ctypes.c_uint64, c_void_pp]),
    "fluxon_cancel_get_transfer": (ctypes.c_int, [_VP, _VP]),
    "fluxon_plan_value_lens": (c_u64_p, [_VP, _VP]),
    "fluxon_release_views": (ctypes.c_int, [_VP, _VP]),
    "fluxon_batch_put_from": (ctypes.c_int, [_VP, c_char_pp, ctypes.c_size_t, c_void_pp, c_u64_p,
                                             ctypes.POINTER(PutOptions), c_int_p]),
    "fluxon_batch_get_into": (ctypes.c_int, [_VP, c_char_pp, ctypes.c_size_t, c_void_pp, c_u64_p, ctypes.c_int,
                                             c_u32_p, ctypes.c_size_t, c_int_p, c_u64_p, c_size_p]),
}

LIST_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


def _candidates():
    env = os.environ.get("FLUXON_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.normpath(os.path.join(here, "..", "..", "build", "libfluxon.so"))]
    # <prefix>/lib/python3/dist-packages/fluxon -> <prefix>/lib
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..", "libfluxon.so.0")))
    out += ["libfluxon.so.0", "libfluxon.so"]
    return out


def _load():
    errors = []
    cands = _candidates()
    for path in cands:
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    hint = ("FLUXON_LIB is set but could not be loaded" if os.environ.get("FLUXON_LIB")
            else "build it with `make` or set FLUXON_LIB=/path/to/libfluxon.so")
    raise ImportError("fluxon: libfluxon.so not found (" + hint + "); tried: " + "; ".join(errors))


lib, path = _load()
for _name, (_res, _args) in _PROTOS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args
