"""Fluxon statuses (include/fluxon.h) and the FluxonError exception family.

Every failing call raises a subclass of FluxonError; the exception carries the status
code (`status`, an int), its C name (`name`, e.g. "FLUXON_ERR_TIMEOUT") and the
operation that failed. Per-key outcomes are lists of Status values (an IntEnum), never
exceptions.
"""
import enum
import json
import operator

from ._lib import lib


class Status(enum.IntEnum):
    OK = 0
    IN_PROGRESS = 1
    PIN_REFUSED = 2  # stored (or held) but not pinned: its tenant's pin budget is full (issue 42)
    ERR_INVALID_ARGUMENT = -1
    ERR_NOT_FOUND = -2
    ERR_KEY_BEING_WRITTEN = -3
    ERR_KEY_EXISTS = -4
    ERR_GROUP_REJECTED = -5
    ERR_NO_SPACE = -6
    ERR_TIMEOUT = -7
    ERR_STALE = -8
    ERR_BUSY = -9
    ERR_UNAVAILABLE = -10
    ERR_PROTOCOL = -11
    ERR_AUTH = -12
    ERR_WRONG_HANDLE = -13
    ERR_CANCELLED = -14
    ERR_LEASE_EXPIRED = -15
    ERR_CONFIG = -16
    ERR_NOMEM = -17
    ERR_INTERNAL = -18
    ERR_UNKNOWN_OUTCOME = -19

    @property
    def c_name(self):
        """The C name, as fluxon_status_string() gives it."""
        return lib.fluxon_status_string(int(self)).decode()


def status_name(status):
    """The C name of a status code ("FLUXON_ERR_UNKNOWN" for an unknown value)."""
    return lib.fluxon_status_string(int(status)).decode()


def to_status(code):
    """Status for a known code, else the int itself."""
    try:
        return Status(code)
    except ValueError:
        return code


class FluxonError(Exception):
    """A Fluxon call failed. `status` is the code, `name` its C name."""

    def __init__(self, status, what="", detail=""):
        self.status = int(status)
        self.name = status_name(status)
        self.what = what
        msg = f"{what}: {self.name}" if what else self.name
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class InvalidArgument(FluxonError, ValueError): pass
class NotFound(FluxonError, KeyError):
    def __str__(self):  # KeyError would repr() the message
        return Exception.__str__(self)
class KeyBeingWritten(FluxonError): pass
class KeyExists(FluxonError): pass
class GroupRejected(FluxonError): pass
class NoSpace(FluxonError): pass
class Timeout(FluxonError, TimeoutError): pass
class Stale(FluxonError): pass
class Busy(FluxonError): pass
class Unavailable(FluxonError, ConnectionError): pass
class ProtocolError(FluxonError): pass
class AuthError(FluxonError, PermissionError): pass
class WrongHandle(FluxonError): pass
class Cancelled(FluxonError): pass
class LeaseExpired(FluxonError): pass
class ConfigError(FluxonError, ValueError): pass
class NoMemory(FluxonError, MemoryError): pass
class InternalError(FluxonError): pass
class UnknownOutcome(FluxonError): pass


_BY_STATUS = {
    Status.ERR_INVALID_ARGUMENT: InvalidArgument, Status.ERR_NOT_FOUND: NotFound,
    Status.ERR_KEY_BEING_WRITTEN: KeyBeingWritten, Status.ERR_KEY_EXISTS: KeyExists,
    Status.ERR_GROUP_REJECTED: GroupRejected, Status.ERR_NO_SPACE: NoSpace,
    Status.ERR_TIMEOUT: Timeout, Status.ERR_STALE: Stale, Status.ERR_BUSY: Busy,
    Status.ERR_UNAVAILABLE: Unavailable, Status.ERR_PROTOCOL: ProtocolError,
    Status.ERR_AUTH: AuthError, Status.ERR_WRONG_HANDLE: WrongHandle,
    Status.ERR_CANCELLED: Cancelled, Status.ERR_LEASE_EXPIRED: LeaseExpired,
    Status.ERR_CONFIG: ConfigError, Status.ERR_NOMEM: NoMemory, Status.ERR_INTERNAL: InternalError,
    Status.ERR_UNKNOWN_OUTCOME: UnknownOutcome,
}


def error_for(status, what="", detail=""):
    """The FluxonError subclass instance for a failing status."""
    return _BY_STATUS.get(status, FluxonError)(status, what, detail)


def integer(value, what):
    """value as an int (a Python or numpy integer), else TypeError naming it: int() would take
    "12" and 1.5 (truncated), and leak its own message for "abc" or None; a bool is refused."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{what}: an int, not {type(value).__name__}")


def u64(value, what, bits=64):
    """value (an int: see integer()) when it fits an unsigned `bits`-bit C argument, else
    InvalidArgument naming it and the range (ctypes wraps: lease_grant(2**64 + 60000) granted
    a 60 s lease)."""
    v = integer(value, what)
    if not 0 <= v < (1 << bits):
        raise InvalidArgument(Status.ERR_INVALID_ARGUMENT, what, f"{value} is outside 0..{(1 << bits) - 1}")
    return v


def sequence(values, what, of):
    """values as a list or tuple (any other iterable read once into a list: an iterator, a
    numpy array, a range), else TypeError naming it ("keys: a sequence of keys, not NoneType")."""
    if isinstance(values, (list, tuple)):
        return values
    try:
        it = iter(values)
    except TypeError:
        raise TypeError(f"{what}: a sequence of {of}, not {type(values).__name__}") from None
    return list(it)


def u64s(values, what, bits=64):
    """A sequence of u64()s (host addresses, byte lengths); a bad one is named with its index
    ("lens[0]: ... (-8 is outside 0..18446744073709551615)")."""
    vals = sequence(values, what, "ints")
    if all(type(v) is int for v in vals) and (not vals or (min(vals) >= 0 and max(vals) >> bits == 0)):
        return vals  # the common case, checked in bulk
    return [u64(v, f"{what}[{i}]", bits) for i, v in enumerate(vals)]


def utf8(value, what, errors="strict"):
    """value (str, bytes or bytearray) as bytes: a str encoded as UTF-8 (errors="surrogateescape"
    for keys: list_keys gives a non-UTF-8 key's bytes as \\udc80..\\udcff). TypeError for another
    type (bytes(5) would be five NUL bytes), ValueError for a str with no UTF-8 form: a lone
    surrogate (UnicodeEncodeError named neither the argument nor the remedy)."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8", errors)
        except UnicodeEncodeError as e:
            why = ("a lone surrogate; only \\udc80..\\udcff, list_keys' escapes of non-UTF-8 bytes, stand "
                   "for bytes" if errors == "surrogateescape" else "a lone surrogate")
            raise ValueError(f"{what}: not encodable as UTF-8: {value[e.start]!r} at index {e.start} is {why}") \
                from None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise TypeError(f"{what}: str or bytes, not {type(value).__name__}")


def config_json(config, what="config"):
    """A config dict as JSON text, else TypeError or ValueError naming the member JSON cannot
    hold (bytes, a set, NaN: json's own message named none)."""
    try:
        return json.dumps(config, allow_nan=False)
    except (TypeError, ValueError) as e:
        for k, v in config.items():
            try:
                json.dumps({k: v}, allow_nan=False)
            except (TypeError, ValueError) as e2:
                raise type(e2)(f"{what}[{k!r}]: not JSON: {e2}") from None
        raise type(e)(f"{what}: not JSON: {e}") from None


def check(status, what, detail=""):
    """Raises the matching FluxonError unless status is OK. A refusal's reason (the
    owner's, or the C client's own: a rejected config at open, a bad argument, naming it;
    fluxon_last_error_message, this thread's last call) joins the detail."""
    if status != 0:
        why = lib.fluxon_last_error_message() if status < 0 else None
        if why:
            why = why.decode("utf-8", "replace")
            detail = f"{detail}; reason: {why}" if detail else f"reason: {why}"
        raise error_for(status, what, detail)
