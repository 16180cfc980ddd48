"""The weight types Colibri reads, in one table: how GGUF numbers them, how libcolibri numbers them
(``colibri_dtype`` in colibri.h, the dtype field of .colibri files), their block shape, and where
their scales lie (what ``colibri check`` scans for NaN/Inf).

Block types store each run of ``block_elems`` elements of a row as one ``block_bytes`` struct in
ggml's byte layout (docs/KERNELS.md); a row must be whole blocks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DType", "DTYPES", "BY_NAME", "BY_COLIBRI_ID", "BY_GGML_ID", "FLOAT_TYPES", "row_bytes", "nonfinite_scales"]


@dataclass(frozen=True)
class DType:
    name: str               # as GGUF spells it: "Q4_K"
    colibri_id: int         # colibri_dtype
    ggml_id: int            # GGUF tensor type id
    block_elems: int        # elements per block (1 for float types)
    block_bytes: int        # bytes per block
    f16_scales: tuple[int, ...] = ()   # byte offsets of the block's f16 scale fields
    e8m0_scales: tuple[int, ...] = ()  # byte offsets of its E8M0 exponents (0xFF is NaN)

    @property
    def is_block(self) -> bool:
        return self.block_elems > 1


DTYPES = (
    DType("F32", 0, 0, 1, 4),
    DType("F16", 1, 1, 1, 2),
    DType("BF16", 2, 30, 1, 2),
    DType("Q8_0", 3, 8, 32, 34, (0,)),
    DType("Q4_0", 4, 2, 32, 18, (0,)),
    DType("Q4_1", 5, 3, 32, 20, (0, 2)),
    DType("Q5_0", 6, 6, 32, 22, (0,)),
    DType("Q5_1", 7, 7, 32, 24, (0, 2)),
    DType("Q2_K", 8, 10, 256, 84, (80, 82)),
    DType("Q3_K", 9, 11, 256, 110, (108,)),
    DType("Q4_K", 10, 12, 256, 144, (0, 2)),
    DType("Q5_K", 11, 13, 256, 176, (0, 2)),
    DType("Q6_K", 12, 14, 256, 210, (208,)),
    DType("IQ4_NL", 13, 20, 32, 18, (0,)),
    DType("IQ4_XS", 14, 23, 256, 136, (0,)),
    DType("MXFP4", 15, 39, 32, 17, (), (0,)),
)
BY_NAME = {t.name: t for t in DTYPES}
BY_COLIBRI_ID = {t.colibri_id: t for t in DTYPES}
BY_GGML_ID = {t.ggml_id: t for t in DTYPES}
FLOAT_TYPES = tuple(t.name for t in DTYPES if not t.is_block)


def row_bytes(name: str, cols: int) -> int:
    """Bytes of a row of ``cols`` elements (a multiple of the block) of the type."""
    t = BY_NAME[name]
    return cols // t.block_elems * t.block_bytes


def nonfinite_scales(name: str, raw: np.ndarray, chunk_blocks: int = 1 << 18) -> int:
    """Number of NaN/Inf scale fields in ``raw`` (uint8, whole blocks of the block type ``name``),
    read in chunks so that temporaries stay small."""
    t = BY_NAME[name]
    blocks = raw.reshape(-1, t.block_bytes)   # blocks: [n_blocks, block_bytes], still the mapping
    bad = 0
    for start in range(0, blocks.shape[0], chunk_blocks):
        part = blocks[start:start + chunk_blocks]
        for at in t.f16_scales:   # exponent bits all set: inf or NaN
            bits = part[:, at].astype(np.uint16) | part[:, at + 1].astype(np.uint16) << 8
            bad += int(np.count_nonzero((bits & 0x7C00) == 0x7C00))
        for at in t.e8m0_scales:
            bad += int(np.count_nonzero(part[:, at] == 0xFF))
    return bad
