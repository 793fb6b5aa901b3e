"""Host buffers as (address, byte length): the batch copy calls accept

  * objects exposing __array_interface__ (numpy arrays): C-contiguous, host memory;
  * objects with data_ptr() (torch tensors and the like): contiguous, on the CPU; the
    length is numel() * element_size() (or nbytes);
  * anything with the buffer protocol (bytes, bytearray, memoryview, mmap, array.array):
    C-contiguous. A read-only buffer that is not `bytes` is copied once (no numpy needed
    otherwise) when used as a source.

Destinations must be writable. Every check failure raises TypeError or ValueError naming
the argument index.
"""
import ctypes


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _itemsize(typestr, what="array"):
    """Bytes per element of an __array_interface__ typestr ("<f4", "|u1", "<U4", "|V16",
    "<M8[ns]"). A unicode element ("U") is 4 bytes per character (UCS-4: "<U4" is 16 bytes,
    read before as 4: a put stored a quarter of the array); an object array ("O") holds
    pointers to Python objects, not their data: refused."""
    kind, digits = typestr[1], typestr[2:].split("[", 1)[0]
    if kind == "O":
        raise TypeError(f"{what}: an object array (dtype object) holds pointers to Python objects, not bytes; "
                        "convert it to a numeric, bytes (S) or unicode (U) dtype first")
    try:
        n = int(digits)
    except ValueError:
        raise TypeError(f"{what}: array element type {typestr!r} is not understood") from None
    return 4 * n if kind == "U" else n


def address_of(obj, writable, what="buffer"):
    """(address, nbytes, keepalive) of a host buffer; keepalive must outlive the C call."""
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        ptr, readonly = ai["data"]
        shape, strides = ai["shape"], ai.get("strides")
        item = _itemsize(ai["typestr"], what)
        if strides is not None:
            expect, s = [], item
            for d in reversed(shape):
                expect.append(s)
                s *= int(d)
            if tuple(reversed(expect)) != tuple(strides) and _prod(shape) > 1:
                raise ValueError(f"{what}: the array is not C-contiguous (strides {strides})")
        if writable and readonly:
            raise ValueError(f"{what}: the array is read-only but is a destination")
        return int(ptr or 0), _prod(shape) * item, obj
    if hasattr(obj, "data_ptr") and callable(obj.data_ptr) and not isinstance(obj, (bytes, bytearray, memoryview)):
        dev = getattr(obj, "device", None)
        if dev is not None and getattr(dev, "type", str(dev)) != "cpu":
            raise ValueError(f"{what}: device {dev} memory: the batch copy calls copy host memory only")
        if hasattr(obj, "is_contiguous") and not obj.is_contiguous():
            raise ValueError(f"{what}: the tensor is not contiguous")
        if hasattr(obj, "numel") and hasattr(obj, "element_size"):
            n = int(obj.numel()) * int(obj.element_size())
        elif hasattr(obj, "nbytes"):
            n = int(obj.nbytes)
        else:
            raise TypeError(f"{what}: has data_ptr() but neither numel()/element_size() nor nbytes")
        return int(obj.data_ptr()), n, obj
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what}: {type(obj).__name__} is not a buffer, an array (__array_interface__) "
                        "or a tensor (data_ptr())") from None
    if not mv.c_contiguous:
        raise ValueError(f"{what}: the buffer is not C-contiguous")
    n = mv.nbytes
    if mv.readonly:
        if writable:
            raise ValueError(f"{what}: {type(obj).__name__} is read-only but is a destination")
        if isinstance(obj, bytes):
            addr = ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value
            return int(addr or 0), n, obj
        copy = bytes(mv)  # a read-only buffer: ctypes cannot take its address, copy it once
        return int(ctypes.cast(ctypes.c_char_p(copy), ctypes.c_void_p).value or 0), n, copy
    if n == 0:
        return 0, 0, obj
    carr = (ctypes.c_char * n).from_buffer(mv.cast("B"))
    return ctypes.addressof(carr), n, (carr, mv)
