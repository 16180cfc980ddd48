"""A structure-aware mutator for GGUF files: parse, change one thing, write back consistently.

Random byte flips rarely get past a GGUF header (every string and array carries its length,
every tensor info its dims, type and offset). `mutate` parses the input with a tolerant reader
(independent of colibri's), changes one field of the structure (a metadata value, its type, an
array element or its length, a key, a tensor's dims / type / offset / name, an entry added or
dropped) and serializes it again with every count, length and padding right; a quarter of the
results then get one raw count or length overwritten (tensor_count, kv_count, a string or
array length), and inputs it cannot parse go to libFuzzer's byte mutations. So the header stays
parseable much of the time and the mutations land on what colibri checks beyond it.
"""
from __future__ import annotations

import random
import struct

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
GGML_TYPES = (0, 1, 2, 3, 8, 30, 6, 12, 14, 39, 255)   # colibri's six, some it refuses, an unknown one
INTERESTING_INTS = (0, 1, 2, 3, 7, 31, 32, 33, 64, 255, 256, 4096, 65535, 1 << 24, (1 << 31) - 1, 1 << 31,
                    (1 << 32) - 1, (1 << 63) - 1, (1 << 64) - 1)
INTERESTING_FLOATS = (0.0, -0.0, 1.0, -1.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan"), 1e6)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        value = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> bytes:
        n = self.take("<Q")
        if n > len(self.data) - self.pos:
            raise ValueError("string past the end")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def value(self, vtype: int):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            sub, n = self.take("<I"), self.take("<Q")
            if sub == ARRAY or (sub not in SCALARS and sub != STRING) or n > len(self.data) - self.pos:
                raise ValueError("bad array")
            return (sub, [self.value(sub) for _ in range(n)])
        if vtype not in SCALARS:
            raise ValueError("bad type")
        return self.take(SCALARS[vtype])


def parse(data: bytes):
    """{"version", "kv": [[key, type, value]], "tensors": [[name, dims, type, offset]], "data"} or None."""
    try:
        r = _Reader(data)
        if r.data[:4] != b"GGUF":
            return None
        r.pos = 4
        version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
        if n_kv > len(data) or n_tensors > len(data):
            return None
        kv = []
        for _ in range(n_kv):
            key = r.string()
            vtype = r.take("<I")
            kv.append([key, vtype, r.value(vtype)])
        tensors = []
        for _ in range(n_tensors):
            name, n_dims = r.string(), r.take("<I")
            if n_dims > 8:
                return None
            dims = [r.take("<Q") for _ in range(n_dims)]
            tensors.append([name, dims, r.take("<I"), r.take("<Q")])
        alignment = next((v for k, t, v in kv if k == b"general.alignment" and t == 4), 32) or 32
        start = (r.pos + alignment - 1) // alignment * alignment
        return {"version": version, "kv": kv, "tensors": tensors, "data": data[start:], "alignment": alignment}
    except (struct.error, ValueError, IndexError, OverflowError):
        return None


def _pack_value(vtype: int, value) -> bytes:
    if vtype == STRING:
        return struct.pack("<Q", len(value)) + value
    if vtype == ARRAY:
        sub, items = value
        return struct.pack("<IQ", sub, len(items)) + b"".join(_pack_value(sub, v) for v in items)
    fmt = SCALARS[vtype]
    if fmt in ("<f", "<d"):
        return struct.pack(fmt, float(value))
    bits = struct.calcsize(fmt) * 8
    value = int(value) % (1 << bits)
    if fmt.islower() or fmt in ("<b", "<h", "<i", "<q"):
        value = value - (1 << bits) if value >= 1 << (bits - 1) else value
    return struct.pack(fmt, value)


def serialize(g: dict) -> bytes:
    out = [b"GGUF", struct.pack("<IQQ", g["version"], len(g["tensors"]), len(g["kv"]))]
    for key, vtype, value in g["kv"]:
        out += [struct.pack("<Q", len(key)), key, struct.pack("<I", vtype), _pack_value(vtype, value)]
    for name, dims, ttype, offset in g["tensors"]:
        out += [struct.pack("<Q", len(name)), name, struct.pack("<I", len(dims)),
                b"".join(struct.pack("<Q", d % (1 << 64)) for d in dims), struct.pack("<IQ", ttype, offset % (1 << 64))]
    head = b"".join(out)
    pad = (-len(head)) % g["alignment"]
    return head + bytes(pad) + g["data"]


def _default(vtype: int, rng: random.Random):
    if vtype == STRING:
        return rng.choice([b"", b"llama", b"gpt2", b"qwen2", b"x" * 40])
    if vtype == ARRAY:
        return (rng.choice([4, 5, 6, STRING]), [])
    return 1.0 if SCALARS[vtype] in ("<f", "<d") else rng.choice(INTERESTING_INTS)


def _mutate_value(vtype: int, value, rng: random.Random):
    if vtype == STRING:
        b = bytearray(value)
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1:
            b[rng.randrange(len(b) + 1):0] = rng.choice([b"\xff", b"\xc3", b"{{", b"{%", b"%}", b"}}", b".", b" "])
        elif op == 2 and b:
            del b[rng.randrange(len(b)):]
        else:
            b.extend(bytes(b))
        return bytes(b)
    if vtype == ARRAY:
        sub, items = value
        items = list(items)
        op = rng.randrange(5)
        if op == 0 and items:
            i = rng.randrange(len(items))
            items[i] = _mutate_value(sub, items[i], rng)
        elif op == 1 and items:
            del items[rng.randrange(len(items)):]
        elif op == 2 and items:
            items.append(items[rng.randrange(len(items))])
        elif op == 3:
            sub = rng.choice([0, 4, 5, 6, 7, STRING, 10, 11, 12])
            items = [_default(sub, rng) for _ in items[:64]]
        elif items:
            items[rng.randrange(len(items))] = items[rng.randrange(len(items))]
        return (sub, items)
    if SCALARS[vtype] in ("<f", "<d"):
        return rng.choice(INTERESTING_FLOATS + (value * 2, -value))
    return rng.choice(INTERESTING_INTS + (value + 1, value - 1, value * 2))


def _mutate_structure(g: dict, rng: random.Random) -> None:
    kv, tensors = g["kv"], g["tensors"]
    op = rng.randrange(10)
    if op <= 3 and kv:                                    # a metadata value
        entry = kv[rng.randrange(len(kv))]
        entry[2] = _mutate_value(entry[1], entry[2], rng)
    elif op == 4 and kv:                                  # a metadata value's type
        entry = kv[rng.randrange(len(kv))]
        entry[1] = rng.choice(list(SCALARS) + [STRING, ARRAY])
        entry[2] = _default(entry[1], rng)
    elif op == 5 and kv:                                  # a key: renamed, dropped or repeated
        i = rng.randrange(len(kv))
        choice = rng.randrange(3)
        if choice == 0:
            kv[i][0] = _mutate_value(STRING, kv[i][0], rng)
        elif choice == 1:
            del kv[i]
        else:
            kv.insert(rng.randrange(len(kv) + 1), list(kv[i]))
    elif op in (6, 7) and tensors:                        # a tensor's dims
        t = tensors[rng.randrange(len(tensors))]
        choice = rng.randrange(4)
        if choice == 0 and t[1]:
            i = rng.randrange(len(t[1]))
            t[1][i] = rng.choice(INTERESTING_INTS + (t[1][i] + 1, t[1][i] - 1, t[1][i] * 2))
        elif choice == 1:
            t[1] = t[1][::-1]
        elif choice == 2 and t[1]:
            t[1] = t[1][:-1]
        else:
            t[1] = t[1] + [rng.choice((1, 2, 32))]
    elif op == 8 and tensors:                             # a tensor's type or offset
        t = tensors[rng.randrange(len(tensors))]
        if rng.randrange(2):
            t[2] = rng.choice(GGML_TYPES)
        else:
            t[3] = rng.choice(INTERESTING_INTS + (t[3] + g["alignment"], t[3] - g["alignment"], t[3] + 1))
    elif tensors:                                         # a tensor info renamed, dropped or repeated
        i = rng.randrange(len(tensors))
        choice = rng.randrange(3)
        if choice == 0:
            tensors[i][0] = _mutate_value(STRING, tensors[i][0], rng)
        elif choice == 1:
            del tensors[i]
        else:
            tensors.insert(rng.randrange(len(tensors) + 1), [tensors[i][0], list(tensors[i][1])] + tensors[i][2:])


def _raw_count(data: bytes, rng: random.Random) -> bytes:
    """One count or length field overwritten, the rest as it was."""
    b = bytearray(data)
    if len(b) < 24:
        return data
    at = rng.choice([8, 16, 24 + 0])   # tensor_count, kv_count, the first key's length
    struct.pack_into("<Q", b, at, rng.choice(INTERESTING_INTS) % (1 << 64))
    return bytes(b)


def mutate(data: bytes, max_size: int, seed: int, fallback) -> bytes:
    """The mutation for libFuzzer's custom-mutator hook; fallback(data, max_size) mutates bytes."""
    rng = random.Random(seed)
    g = parse(data) if rng.random() < 0.75 else None
    if g is None:
        return fallback(data, max_size)
    for _ in range(1 + (rng.random() < 0.25)):
        _mutate_structure(g, rng)
    out = serialize(g)
    if rng.random() < 0.25:
        out = _raw_count(out, rng)
    return out[:max_size]
