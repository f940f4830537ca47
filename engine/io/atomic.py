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

import errno
import json
import os
import re
import uuid
from contextlib import contextmanager
from typing import BinaryIO, Callable, Iterator

import numpy as np

from ..errors import FileWriteError

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


#: errno values that mean "no room": the disk (or the user's quota) is full, or the file would pass the
#: size the system allows a process to write (RLIMIT_FSIZE, a file system's largest file).
NO_ROOM = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, name))


def _cannot_write(path: str, exc: OSError) -> OSError:
    """A :class:`FileWriteError` that names the destination and, for a full disk, says so in words."""
    why = exc.strerror or str(exc)
    if exc.errno in NO_ROOM:
        why = f"the disk is full or a file size limit was reached ({why}); free some space and try again"
    return FileWriteError(exc.errno, f"Cannot write '{path}': {why}")


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


def stage(path: str, write: Callable[[BinaryIO], None], keep_extension: bool = False) -> str:
    """Write a file meant for ``path`` with ``write(fh)`` under a temporary name beside it, flushed to disk
    but not yet in place; returns that name. :func:`commit` puts it into place; until then ``path`` is as
    it was. Used to have the files of a change on disk before anything of the old state is dropped (the
    first frames of a re-bake). On failure nothing is left behind.

    Raises
    ------
    OSError
        If writing fails; the message names ``path`` (and says so when the disk is full).
    """
    tmp = temporary_name(path, keep_extension)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        _fsync(tmp)
    except BaseException as exc:
        discard(tmp)
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc) from exc
        raise
    return tmp


def commit(tmp: str, path: str) -> None:
    """Rename a file :func:`stage` wrote into place (atomic, like every other write here)."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        discard(tmp)
        raise _cannot_write(path, exc) from exc


def move(source: str, path: str) -> None:
    """Rename a finished file (a process's log) over ``path`` in one step; ``source`` stays if it fails."""
    os.replace(source, path)


def discard(tmp: str) -> None:
    """Remove a staged file that will not be committed (gone already is fine)."""
    try:
        os.remove(tmp)
    except OSError:
        pass


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
