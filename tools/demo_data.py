"""Corpus for the bundled demo model: the King James Bible and Jane Austen's six novels.

Both come from Debian packages, both are public domain:
  bible-kjv, bible-kjv-text   the `bible` reader and its KJV text
  r-cran-janeaustenr          the novels as character vectors in R's lazy-load database

The novels are read straight from R's serialized format (no R needed); the small reader
below understands exactly the subset those files use and fails loudly on anything else.

The unit of text is a verse (KJV) or a paragraph (Austen). A unit is held out for
validation when the first byte of sha256(source + index + text) is below 13 (13/256 ≈ 5%),
so the split is deterministic and independent of ordering.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import re
import struct
import subprocess
import zlib
from pathlib import Path

JANEAUSTENR_DATA = Path("/usr/lib/R/site-library/janeaustenr/data/Rdata")
AUSTEN_BOOKS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma",
                "northangerabbey", "persuasion"]
KJV_RANGE = "Gen1:1-Rev22:21"
HELDOUT_HASH_BELOW = 13  # first sha256 byte < 13  ->  ~5.1% of units held out


class RDataError(ValueError):
    """The R serialization stream holds something this reader does not understand."""


# --- R serialization (XDR, versions 2 and 3) -----------------------------------------------

_NILVALUE, _REF, _GLOBALENV, _EMPTYENV, _BASEENV, _ALTREP = 254, 255, 253, 242, 241, 238
_SYM, _LIST, _CHAR, _LGL, _INT, _REAL, _STR, _VEC = 1, 2, 9, 10, 13, 14, 16, 19
_NA_INT = -2147483648


class _RReader:
    """Reads one XDR serialization stream into plain Python values.

    STRSXP -> list[str | None], INTSXP/LGLSXP -> list[int | None], REALSXP -> list[float],
    VECSXP -> list, LISTSXP -> dict(tag -> value), NULL -> None. Attributes are dropped
    except `names`, which turns a VECSXP into a dict.
    """

    def __init__(self, data: bytes):
        self.data, self.pos, self.refs = data, 0, []
        if data[:2] != b"X\n":
            raise RDataError(f"not an XDR R serialization stream (starts {data[:2]!r})")
        self.pos = 2
        version = self._int()
        self._int(), self._int()  # writer R version, minimal reader version
        if version == 3:
            encoding_len = self._int()
            self._take(encoding_len)  # native encoding name, e.g. b'UTF-8'
        elif version != 2:
            raise RDataError(f"unsupported R serialization version {version}")

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RDataError(f"truncated stream: need {n} bytes at offset {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def _int(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def _length(self) -> int:
        n = self._int()
        if n == -1:  # long vector: two more ints
            hi, lo = self._int(), self._int()
            n = (hi << 32) | (lo & 0xFFFFFFFF)
        return n

    def item(self):
        flags = self._int()
        sxp = flags & 0xFF
        has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
        if sxp in (_NILVALUE, _GLOBALENV, _EMPTYENV, _BASEENV):
            return None
        if sxp == _REF:
            index = flags >> 8 or self._int()
            return self.refs[index - 1]
        if sxp == _SYM:
            name = self.item()
            self.refs.append(name)
            return name
        if sxp == _LIST:
            return self._pairlist(has_attr, has_tag)
        if sxp == _CHAR:
            n = self._int()
            if n == -1:
                return None
            raw = self._take(n)
            return raw.decode("latin-1") if flags & (1 << 14) else raw.decode("utf-8")
        if sxp in (_LGL, _INT):
            n = self._length()
            values = list(struct.unpack(f">{n}i", self._take(4 * n)))
            value = [None if v == _NA_INT else v for v in values]
        elif sxp == _REAL:
            n = self._length()
            value = list(struct.unpack(f">{n}d", self._take(8 * n)))
        elif sxp == _STR:
            value = [self.item() for _ in range(self._length())]
        elif sxp == _VEC:
            value = [self.item() for _ in range(self._length())]
        elif sxp == _ALTREP:
            raise RDataError("ALTREP objects are not supported by this reader")
        else:
            raise RDataError(f"unsupported R object type {sxp} at offset {self.pos - 4}")
        if has_attr:
            attributes = self.item()
            names = attributes.get("names") if isinstance(attributes, dict) else None
            if sxp == _VEC and names is not None:
                value = dict(zip(names, value))
        return value

    def _pairlist(self, has_attr: bool, has_tag: bool) -> dict:
        """A LISTSXP chain (attributes / tagged lists) as an ordered dict tag -> value."""
        out = {}
        while True:
            if has_attr:
                self.item()
            tag = self.item() if has_tag else None
            out[tag if tag is not None else len(out)] = self.item()
            flags = self._int()
            sxp = flags & 0xFF
            if sxp == _NILVALUE:
                return out
            if sxp != _LIST:
                raise RDataError(f"pairlist ends in object type {sxp}, expected NULL")
            has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))


def _unpack_lazyload_blob(blob: bytes, name: str) -> bytes:
    """One lazy-load entry: 4-byte big-endian raw length + compressed body (zlib, or a type
    byte 'Z'/'2'/'0' for xz/bzip2/none as R's compress=2/3 write it)."""
    if len(blob) < 5:
        raise RDataError(f"{name}: lazy-load entry of {len(blob)} bytes is too short")
    raw_len = struct.unpack(">I", blob[:4])[0]
    kind, body = blob[4:5], blob[5:]
    if kind == b"Z":
        raw = lzma.decompress(body)
    elif kind == b"2":
        raw = bz2.decompress(body)
    elif kind == b"0":
        raw = body
    else:
        raw = zlib.decompress(blob[4:])
    if len(raw) != raw_len:
        raise RDataError(f"{name}: decompressed {len(raw)} bytes, header says {raw_len}")
    return raw


def read_lazyload(base: Path, names: list[str]) -> dict:
    """Objects `names` from R's lazy-load database: base.rdx is a gzip'd serialized index
    (names -> [offset, length] into base.rdb), each rdb entry a compressed serialization."""
    rdx_path, rdb_path = base.with_suffix(".rdx"), base.with_suffix(".rdb")
    for path in (rdx_path, rdb_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (apt-get install r-cran-janeaustenr)")
    index = _RReader(gzip.decompress(rdx_path.read_bytes())).item()
    variables = index.get("variables") if isinstance(index, dict) else None
    if not isinstance(variables, dict):
        raise RDataError(f"{rdx_path}: no 'variables' table in the index")
    rdb = rdb_path.read_bytes()
    out = {}
    for name in names:
        if name not in variables:
            raise RDataError(f"{rdx_path}: no object named {name!r} (have {sorted(variables)})")
        offset, length = variables[name]
        blob = rdb[offset:offset + length]
        out[name] = _RReader(_unpack_lazyload_blob(blob, f"{rdb_path}:{name}")).item()
    return out


# --- the two sources, as lists of text units ------------------------------------------------

def kjv_verses() -> list[str]:
    """Every KJV verse's text, in canon order, without chapter headings or verse numbers."""
    try:
        dump = subprocess.run(["bible", "-l100000", KJV_RANGE], capture_output=True,
                              text=True, check=True).stdout
    except FileNotFoundError:
        raise SystemExit("`bible` not found: apt-get install -y bible-kjv bible-kjv-text")
    verse_line = re.compile(r"^\s*(\d+) (.+)$")
    verses = [m.group(2).strip() for m in map(verse_line.match, dump.splitlines()) if m]
    if len(verses) < 31000:
        raise SystemExit(f"bible {KJV_RANGE}: expected ~31,300 verses, parsed {len(verses)}")
    return verses


_AUSTEN_HEADING = re.compile(r"^(chapter|volume)\b|^(the end|finis)\W*$|^by jane austen$",
                             re.IGNORECASE)


def austen_paragraphs() -> list[str]:
    """Every paragraph of the six novels from the first chapter on, lines joined, runs of
    spaces collapsed; title pages, chapter/volume headings and the `_emphasis_`
    underscores removed."""
    books = read_lazyload(JANEAUSTENR_DATA, AUSTEN_BOOKS)
    paragraphs = []
    for name in AUSTEN_BOOKS:
        lines = [(line or "").strip() for line in books[name]]
        first_chapter = next(i for i, line in enumerate(lines) if line.lower().startswith("chapter"))
        current: list[str] = []
        for text in lines[first_chapter:] + [""]:
            if text and not _AUSTEN_HEADING.match(text):
                current.append(text.replace("_", ""))
            elif not text and current:
                paragraphs.append(re.sub(r"\s+", " ", " ".join(current)))
                current = []
    return paragraphs


def is_heldout(source: str, index: int, text: str) -> bool:
    digest = hashlib.sha256(f"{source}\0{index}\0{text}".encode()).digest()
    return digest[0] < HELDOUT_HASH_BELOW


def build_corpus() -> dict:
    """{"train": str, "val": str, "stats": {...}}; units joined by newlines, the two sources
    separated by a blank line. Same input packages -> byte-identical output."""
    sources = {"kjv": kjv_verses(), "austen": austen_paragraphs()}
    split = {"train": [], "val": []}
    stats = {}
    for source, units in sources.items():
        parts = {"train": [], "val": []}
        for i, text in enumerate(units):
            parts["val" if is_heldout(source, i, text) else "train"].append(text)
        for key in split:
            split[key].append("\n".join(parts[key]))
        stats[source] = {"units": len(units), "val_units": len(parts["val"]),
                         "words": sum(len(u.split()) for u in units)}
    return {"train": "\n\n".join(split["train"]), "val": "\n\n".join(split["val"]),
            "stats": stats}


if __name__ == "__main__":
    corpus = build_corpus()
    print(corpus["stats"], len(corpus["train"]), len(corpus["val"]))
