"""Atomic file writes: the one way Surge puts a file into place.

Every file Surge writes that another process may read while it is written (cache frames, the
manifest, checkpoints, collider grids, job files, USD point files) is written to a temporary name
beside its destination, flushed to disk, and renamed over the destination (``os.replace``, atomic
on POSIX and on NTFS). A reader sees the old file or the new one, never half of one, even if the
writer is killed.

The temporary name is unique per write (``<name>.<12 hex>.tmp``, or ``<stem>.<12 hex>.tmp<ext>``
when the writer picks the format from the extension, as USD does), so two writers never share one;
a write that fails removes its temporary file, and :func:`is_temporary` recognises those a killed
writer left so that the cache's cleanup can remove them.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from contextlib import contextmanager
from typing import BinaryIO, Callable, Iterator

import numpy as np

_TEMPORARY_RE = re.compile(r"\.[0-9a-f]{12}\.tmp(\.[A-Za-z0-9]+)?$")


def temporary_name(path: str, keep_extension: bool = False) -> str:
    """A unique temporary name beside ``path``; with ``keep_extension`` it ends in the same extension."""
    tag = uuid.uuid4().hex[:12]
    if keep_extension:
        stem, ext = os.path.splitext(path)
        return f"{stem}.{tag}.tmp{ext}"
    return f"{path}.{tag}.tmp"


def is_temporary(name: str) -> bool:
    """True for a file name :func:`temporary_name` makes (a write in progress or left by a killed writer)."""
    return bool(_TEMPORARY_RE.search(name))


def final_name(name: str) -> str:
    """The destination name of a temporary name (``frame_000001.npz.0123456789ab.tmp`` ->
    ``frame_000001.npz``); other names unchanged."""
    m = _TEMPORARY_RE.search(name)
    if not m:
        return name
    return name[:m.start()] + (m.group(1) or "")


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _cannot_write(path: str, exc: OSError) -> OSError:
    """An ``OSError`` that names the destination (a full disk says which file it stopped)."""
    err = OSError(exc.errno, f"Cannot write '{path}': {exc.strerror or exc}")
    err.filename = path
    return err


@contextmanager
def replacing(path: str, keep_extension: bool = False) -> Iterator[str]:
    """Context manager yielding a temporary path to write; on success it is flushed and renamed to
    ``path``, on any failure it is removed and the destination is left as it was.

    Raises
    ------
    OSError
        If writing or renaming fails; the message names ``path``.
    """
    tmp = temporary_name(path, keep_extension)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.remove(tmp)
        except OSError:
            pass  # never created, or already gone
        if isinstance(exc, OSError) and not str(exc).startswith("Cannot write"):
            raise _cannot_write(path, exc) from exc
        raise


def write_file(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` atomically with ``write(fh)`` on a binary file handle."""
    with replacing(path) as tmp:
        with open(tmp, "wb") as fh:
            write(fh)


def write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    write_file(path, lambda fh: fh.write(data))


def write_json(path: str, doc, indent: int = 1, sort_keys: bool = True) -> None:
    """Write ``doc`` as UTF-8 JSON to ``path`` atomically."""
    write_bytes(path, json.dumps(doc, indent=indent, sort_keys=sort_keys).encode("utf-8"))


def write_npz(path: str, arrays: dict) -> None:
    """Write ``arrays`` as an uncompressed numpy ``.npz`` (no pickles) to ``path`` atomically."""
    write_file(path, lambda fh: np.savez(fh, **arrays))
