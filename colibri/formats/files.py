"""The one way Colibri opens a file that comes with a model: regular files only, never a blocking open.

A model path, or any file inside a model directory, could be a FIFO (opening it for reading
waits for a writer forever), a device (/dev/zero never ends) or a socket. Every reader goes
through open_regular: the path is stat'ed first, so a special file is refused without being
opened at all, and then opened with O_NONBLOCK and fstat'ed again, so a file swapped for a
FIFO between the two calls cannot block either.
"""
from __future__ import annotations

import os
import stat

from ..errors import ModelError

# Bound on a side file (config, tokenizer, template); tokenizer.json of a 256K vocabulary is ~35 MB.
MAX_SIDE_FILE_BYTES = 100_000_000

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_BINARY = getattr(os, "O_BINARY", 0)   # Windows


def _not_regular(path, mode: int) -> ModelError:
    kind = next((name for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                                          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                                          (stat.S_ISSOCK, "a socket")) if test(mode)), "a special file")
    return ModelError(f"{os.fspath(path)}: not a regular file ({kind})")


def check_regular(path: str | os.PathLike) -> os.stat_result:
    """stat(path) (symlinks followed) if it is a regular file; ModelError naming what it is otherwise."""
    try:
        info = os.stat(path)
    except OSError as e:
        raise ModelError(f"{os.fspath(path)}: cannot open ({e.strerror or e})") from None
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(path, info.st_mode)
    return info


def open_regular(path: str | os.PathLike) -> int:
    """A read-only descriptor of the regular file at `path` (the caller closes it); ModelError
    for anything else, decided before any blocking open."""
    check_regular(path)
    try:
        fd = os.open(path, _FLAGS | _BINARY)
    except OSError as e:
        raise ModelError(f"{os.fspath(path)}: cannot open ({e.strerror or e})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        if _FLAGS & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; ModelError otherwise."""
    fd = open_regular(path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise ModelError(f"{os.fspath(path)}: cannot read ({e.strerror or e})") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise ModelError(f"{os.fspath(path)}: larger than the {max_bytes}-byte limit for this file")
    return raw


def read_text(path: str | os.PathLike, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most `max_bytes`; ModelError otherwise."""
    raw = read_regular(path, max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelError(f"{os.fspath(path)}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
