"""The one place the Python readers map weight files: read-only, with huge pages asked for."""
from __future__ import annotations

import mmap


def map_weights(fileno: int) -> mmap.mmap:
    """A read-only mapping of the whole open file, with Linux's MADV_HUGEPAGE asked for (best
    effort): file pages the kernel reads in for it then come as large folios mapped 2 MiB at a
    time, which cuts the TLB misses of a decode step streaming the weights (BENCHMARKS.md: OLMoE
    q4_0 decoded 27% faster from 2 MiB mappings than from 4 KiB ones). The C loader does the
    same for .colibri files."""
    mapped = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            mapped.madvise(advice)
        except OSError:
            pass   # THP disabled or not for files: plain pages, nothing lost
    return mapped


def mapping_address(mapped: mmap.mmap) -> int:
    """The address of byte 0 of a mapping (for the C core, which pages experts from the file
    behind it: colibri_model_add_file)."""
    import numpy as np

    view = np.frombuffer(mapped, dtype=np.uint8, count=1)   # a transient export of the buffer
    address = view.ctypes.data
    del view
    return address
