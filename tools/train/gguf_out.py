"""A GGUF v3 writer for the trained model: metadata, F32 norms and router, Q8_0 matrices, a Q5_0
embedding table (Q4_0 also written correctly, unused)."""

import struct

import numpy as np

GGML_F32, GGML_Q4_0, GGML_Q5_0, GGML_Q8_0 = 0, 2, 6, 8
ALIGN = 32
_U32, _I32, _F32, _BOOL, _STR, _ARR, _U64 = 4, 5, 6, 7, 8, 9, 10


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(v):
    """(type id, bytes) of a metadata value; ints are u32 unless given as ("i32", list)."""
    if isinstance(v, bool):
        return _BOOL, struct.pack("<?", v)
    if isinstance(v, int):
        return _U32, struct.pack("<I", v)
    if isinstance(v, float):
        return _F32, struct.pack("<f", v)
    if isinstance(v, str):
        return _STR, _str(v)
    if isinstance(v, tuple) and v[0] == "i32":
        return _ARR, struct.pack("<IQ", _I32, len(v[1])) + np.asarray(v[1], "<i4").tobytes()
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return _ARR, struct.pack("<IQ", _STR, len(v)) + b"".join(_str(x) for x in v)
    raise TypeError("unsupported metadata value %r" % (v,))


def quantize_q8_0(rows):
    """Blocks of 32 along each row: an f16 scale (max |x| / 127) and 32 signed bytes."""
    x = np.asarray(rows, np.float32).reshape(-1, 32)
    d = np.abs(x).max(axis=1) / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.clip(np.rint(x * inv[:, None]), -127, 127).astype(np.int8)
    out = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "i1", 32)])
    out["d"] = d.astype(np.float16)
    out["qs"] = q
    return out.tobytes()


def quantize_q4_0(rows):
    """Blocks of 32: an f16 scale (the largest-magnitude value / -8) and 32 4-bit codes, element j
    in the low nibble of byte j and element j + 16 in its high nibble (ggml's layout)."""
    x = np.asarray(rows, np.float32).reshape(-1, 32)
    extreme = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]
    d = extreme / -8.0
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0)
    q = np.minimum(15, (x * inv[:, None] + 8.5).astype(np.int32)).astype(np.uint8)
    out = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "u1", 16)])
    out["d"] = d.astype(np.float16)
    out["qs"] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def quantize_q5_0(rows):
    """Blocks of 32: an f16 scale (the largest-magnitude value / -16), the 32 fifth bits in a u32
    (element j at bit j) and the low nibbles laid out as in Q4_0 (ggml's layout)."""
    x = np.asarray(rows, np.float32).reshape(-1, 32)
    extreme = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]
    d = extreme / -16.0
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0)
    q = np.minimum(31, (x * inv[:, None] + 16.5).astype(np.int32)).astype(np.uint32)
    qh = ((q >> 4) & 1) << np.arange(32, dtype=np.uint32)
    out = np.empty(len(x), dtype=[("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    out["d"] = d.astype(np.float16)
    out["qh"] = qh.sum(axis=1, dtype=np.uint64).astype(np.uint32)
    low = (q & 15).astype(np.uint8)
    out["qs"] = low[:, :16] | (low[:, 16:] << 4)
    return out.tobytes()


def dequantize_q8_0(data, shape):
    blocks = np.frombuffer(data, dtype=[("d", "<f2"), ("qs", "i1", 32)])
    return (blocks["qs"].astype(np.float32) * blocks["d"].astype(np.float32)[:, None]).reshape(shape)


def write(path, metadata, tensors):
    """tensors: (name, numpy array in row-major torch layout, ggml type). GGUF lists dimensions
    innermost first, so an array of shape (a, b, c) is written as ne = [c, b, a]."""
    infos, blobs, offset = [], [], 0
    for name, array, kind in tensors:
        array = np.ascontiguousarray(array, np.float32)
        quantize = {GGML_Q8_0: quantize_q8_0, GGML_Q5_0: quantize_q5_0,
                    GGML_Q4_0: quantize_q4_0}.get(kind)
        data = quantize(array) if quantize else array.astype("<f4").tobytes()
        ne = list(reversed(array.shape))
        infos.append(_str(name) + struct.pack("<I", len(ne)) +
                     b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", kind, offset))
        pad = (-len(data)) % ALIGN
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    kv = b""
    for key, value in metadata.items():
        kind, data = _value(value)
        kv += _str(key) + struct.pack("<I", kind) + data
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)) + kv + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
