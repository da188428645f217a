"""FilesystemStore: one file per key under a root directory, per the Zarr v3 filesystem
store spec (https://zarr-specs.readthedocs.io/en/latest/v3/stores/filesystem/index.html).
Specification: stores/filesystem.md.

Every write is atomic per key: the value goes to a temporary file in the key's directory
and is renamed over the key, so a reader or a crash sees the old value or the new one,
never a torn file. The file a rename replaces is given a second name first and
unlinked by a sync thread (:mod:`.graves`): freeing it is not the writer's wait. There
is no atomicity across keys; a write ``transaction()`` only groups work, and a read
transaction reads one version of each key (it keeps the files it reads open: a shard's
index and its inner chunks come from the same file).

``key_lock(keys)`` is the advisory lock the chunk engine holds around every
read-modify-write of a chunk, shard or ``zarr.json`` (no lost updates between writers in
any thread or process): ``flock`` on one of a fixed set of lock files chosen by the key's
hash (:mod:`kvzarr.stores.keylocks`), in a directory beside the root.

``append`` writes in place at the end of the file, as atomic as a ``set``:

* Under an exclusive ``flock`` of the file (appenders in any process take turns; the
  compare of the size and the write are one step), the appender first makes a hard link
  to the file named ``.<name>.kvzarr-append-<old size>`` in the key's directory (the
  *marker*: atomic, and it records the size to go back to), then writes, then removes
  the marker. A SIGKILL can stop a multi-page write at any page, so the file alone
  cannot tell a torn append from a finished one; the marker can.
* Every read checks the file's link count in the ``fstat`` it makes anyway: a file with
  more than one link is looked up among the markers of its directory, and a marker of
  the same inode means "serve only the first <old size> bytes". A read during a live
  append or after a killed one therefore sees the old value, never torn bytes; a value
  is read exactly to the size its ``fstat`` saw, so an append that starts later is not
  seen half done.
* Before its first marker in a root, an appender marks the root directory itself
  (the extended attribute :data:`APPENDS_XATTR`). A bulk read of small values
  (``read_many_into``) in a root without it skips the ``fstat``, and reads again with
  it if the mark appeared meanwhile.
* The next append of that key (holding the lock) truncates the file back to the
  recorded size and removes the marker. A ``set`` or ``erase`` of a file that has a
  marker removes it (the marker would keep the replaced file's bytes alive).
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # no flock (Windows): no appends
    fcntl = None  # type: ignore[assignment]

from ..errors import (AppendConflictError, InvalidKeyError, KvzarrError, StoreError,
                      StoreFullError, StorePermissionError, UnsupportedOperationError)
from .byteranges import ByteRequest, request_span
from ..runtime import workers
from . import graves
from .base import Capabilities, Store, check_append_size, no_append_target
from .keylocks import KeyLockTable

#: Temporary files carry this marker in their name; listings never show them.
TEMP_MARKER = ".kvzarr-tmp-"
#: The hard link that marks an append in progress (or killed) is named
#: ``.<file name>.kvzarr-append-<size before the append>``; listings never show it.
APPEND_MARKER = ".kvzarr-append-"
#: The directory of the key lock files when they cannot live beside the root (see
#: ``FilesystemStore._lock_directory``); listings never show it, keys may not use it.
LOCK_DIR = ".kvzarr-locks"
#: The extended attribute of the root directory set before the store's first append
#: marker and never removed: where it is absent no file has a marker, and a bulk read of
#: small values needs no link count (an ``fstat`` per file, a fifth of the read). An
#: attribute, not a file: other Zarr readers listing the root see nothing of it.
APPENDS_XATTR = "user.kvzarr.appends"
#: what every marker starts with: the one substring a listing checks per entry
_MARKERS = ".kvzarr-"
#: an append that finds its file replaced by a set this many times in a row gives up
_APPEND_ATTEMPTS = 3
#: a batch of at least this many files is read or written on the worker threads
_PARALLEL_FILES = 4
#: metadata documents get no grave (graves.py) when replaced: they are small, and they
#: live in the directories other Zarr readers list to find a group's members, where a
#: grave would show for a moment as an object they do not recognise
_NODE_DOCUMENTS = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
#: a bulk read of at least this many files looks for :data:`APPENDS_XATTR` (twice), to
#: skip an fstat per file
_UNLINKED_READS = 8
#: a read transaction keeps at most this many files open: the chunk engine finishes one
#: shard's reads (index, then inner chunks) before it starts the next
PINNED_FILES = 32


class _TempNames:
    """The 32 hex digits that make a temporary file's name unique: 16 random ones drawn
    once per process (again in a forked child, which must not repeat its parent's
    names), then a counter. Cheaper than a uuid4 per write (a random-number syscall and
    an object), and as unique: names from other processes differ in the random half, and
    ``O_EXCL`` refuses a clash anyway (the write then fails rather than sharing a file)."""

    def __init__(self) -> None:
        self.renew()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.renew)

    def renew(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.counter = itertools.count()

    def __call__(self) -> str:
        # next() of an itertools.count is atomic under the GIL: threads get distinct numbers
        return f"{self.prefix}{next(self.counter) & 0xFFFFFFFFFFFFFFFF:016x}"


_temp_suffix = _TempNames()


def _hidden(name: str) -> bool:
    return _MARKERS in name and (TEMP_MARKER in name or APPEND_MARKER in name
                                 or name == LOCK_DIR)


class FilesystemStore(Store):
    """The Zarr v3 filesystem layout: one file per key under ``root`` (a ``.zarr``
    directory other Zarr readers open). Each write is atomic per key (a temporary file
    renamed over the key), with no atomicity across keys: ``transaction()`` only groups
    work, and a crash in the middle of a multi-key write leaves some keys new and some
    old. Many threads and processes may write at once; kvzarr's read-modify-writes hold
    :meth:`key_lock`, so none loses another's update. Specification:
    ``stores/filesystem.md``."""

    # Partial writes use the base read-modify-write, whose _set is copy-and-rename: the
    # per-key atomicity promise holds for them too.
    capabilities = Capabilities(partial_reads=True, partial_writes=True, multi_process=True,
                                appends=fcntl is not None and hasattr(os, "link"),
                                key_locks=fcntl is not None)
    #: A segment is a file name, and a write first makes ``.<name><TEMP_MARKER><32 hex>``
    #: beside it: with the common NAME_MAX of 255 bytes, names up to 210 bytes can be
    #: written as well as read. Longer ones are refused by every operation alike.
    max_segment_bytes = 255 - 1 - len(TEMP_MARKER) - 32
    #: every value is written into its file before ``set_many`` returns: views of the
    #: caller's array (the bulk write's plain chunks) go down without a bytes copy
    copies_values = True

    def __init__(self, root: str | os.PathLike, *, read_only: bool = False,
                 fsync: bool = False, lock_timeout: float | None = None,
                 key_locks: bool = True) -> None:
        """``fsync=True`` flushes each value to disk before it replaces the old one
        (durable across power loss, slower); the default matches other Zarr filesystem
        stores: atomic per key, durable once the OS writes back. ``lock_timeout``
        seconds bound each wait for a key lock (``key_lock``; None: no bound), then
        ConflictError. ``key_locks=False`` takes no key locks (``key_lock`` does
        nothing): for a single writer, or writers that never share a chunk."""
        super().__init__(read_only=read_only)
        if not key_locks and self.capabilities.key_locks:
            self.capabilities = replace(self.capabilities, key_locks=False)
        self.root = Path(root).absolute()
        self._root_prefix = os.path.join(str(self.root), "")
        #: the root's appends mark was seen: it is never removed, so once is enough
        self._appends_seen = False
        self.fsync = fsync
        self.batches_writes = fsync    # a set per chunk would sync its directory each time
        self._options = dict(read_only=read_only, fsync=fsync, lock_timeout=lock_timeout,
                             key_locks=key_locks)
        if not read_only:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise _translate(e, str(self.root)) from e
        self._locks = KeyLockTable(self._lock_directory, lock_timeout, _translate)

    # -- key locks (see kvzarr.stores.keylocks) --------------------------------------------

    def _key_lock(self, keys: Sequence[str]) -> Any:
        if not self.capabilities.key_locks:
            return super()._key_lock(keys)
        return self._locks.hold(keys)

    def _lock_directory(self) -> Path:
        """Where the lock files live: beside the root (``.<root name>.kvzarr-locks``, so
        no Zarr reader listing the root sees them and erasing the root keeps them),
        unless the root's parent is not writable; then inside the root, under
        :data:`LOCK_DIR` (hidden from listings). A lock directory inside the root that
        exists already wins, so every process agrees once one had to fall back."""
        real = Path(os.path.realpath(self.root))
        inside = real / LOCK_DIR
        if inside.is_dir():
            return inside
        beside = real.parent / f".{real.name}{LOCK_DIR}"
        try:
            beside.mkdir(exist_ok=True)
            return beside
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise _translate(e, str(beside)) from e
        try:
            inside.mkdir(exist_ok=True)
        except OSError as e:
            raise _translate(e, str(inside)) from e
        return inside

    def _close(self) -> None:
        graves.flush()
        self._locks.close()

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (str(self.root),), dict(self._options)

    def _path(self, key: str) -> Path:
        return Path(self._file_name(key))

    def _file_name(self, key: str) -> str:
        """The key's file as a string: reads use it as is, since building a Path costs
        more than the ``open`` itself (keys are checked: no ``..``, no leading ``/``)."""
        if _MARKERS in key and (TEMP_MARKER in key or APPEND_MARKER in key
                                or LOCK_DIR in key.split("/")):
            raise InvalidKeyError(
                f"keys may not contain {TEMP_MARKER!r} or {APPEND_MARKER!r}, nor a "
                f"segment {LOCK_DIR!r}", key=key)
        return self._root_prefix + key

    # -- reading: exactly the size a marker allows ----------------------------------------

    def _open_value(self, key: str) -> tuple[int, int] | None:
        """An open descriptor of the key's file and the size of its value (the size
        before an unfinished append, see the module docstring); None if absent."""
        path = self._file_name(key)
        try:
            fd = os.open(path, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise _translate(e, key) from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                return None
            size = st.st_size if st.st_nlink == 1 else _size_before_append(
                Path(path), st, lambda: os.fstat(fd), key)
        except BaseException as e:
            os.close(fd)
            if isinstance(e, OSError):
                raise _translate(e, key) from e
            raise
        return fd, size

    def _get(self, key: str) -> bytes | None:
        if self._pins() is not None:
            return self._read_value(key, _read_whole)
        # Outside a transaction (the chunk engine's reads of many small chunks, one per
        # pool thread): open, one fstat for the size and the link count, one read.
        opened = self._open_value(key)
        if opened is None:
            return None
        fd, size = opened
        try:
            return _pread_exactly(fd, size, 0)
        except OSError as e:
            raise _translate(e, key) from e
        finally:
            os.close(fd)

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        request_span(request, 0)          # a bad request fails before the file is opened

        def read(fd: int, size: int) -> bytes:
            start, end = request_span(request, size)
            return _pread_exactly(fd, end - start, start)
        return self._read_value(key, read)

    def _read_value(self, key: str, read: Callable[[int, int], bytes]) -> bytes | None:
        """``read(fd, size)`` of the key's value, None if absent. Inside a read
        transaction the file stays open until the transaction ends (see :meth:`_begin`)."""
        pins = self._pins()
        if pins is None:
            opened = self._open_value(key)
            if opened is None:
                return None
            fd, size = opened
            try:
                return read(fd, size)
            except OSError as e:
                raise _translate(e, key) from e
            finally:
                os.close(fd)
        pinned = pins.get(key)
        if pinned is None:
            pinned = self._open_value(key)
            if pinned is None:
                return None
            pins[key] = pinned
            if len(pins) > PINNED_FILES:
                os.close(pins.popitem(last=False)[1][0])
        else:
            pins.move_to_end(key)
        try:
            return read(*pinned)
        except OSError as e:
            raise _translate(e, key) from e

    def _read_many_into(self, keys: Sequence[str], view: memoryview,
                        size: int) -> list[int | None]:
        if self._pins() is not None:    # inside a read transaction: its pinned files
            return super()._read_many_into(keys, view, size)
        # Each file read straight into its place, on this thread from the page cache and
        # on the pool when the disk makes the first ones wait (workers.map_probed_runs).
        # Where no append was ever made no file has a marker, so the link count (an
        # fstat) is not needed: the root is marked before the first marker is made, so
        # if it is still unmarked after the reads, none of them met a marker; if the
        # mark appeared meanwhile, the files are read again with their link counts.
        if len(keys) >= _UNLINKED_READS and not self._appends_made():
            sizes = workers.map_probed_runs(
                lambda lo, hi: self._read_run_unlinked(keys, view, size, lo, hi), len(keys))
            if not self._appends_made():
                return sizes
        return workers.map_probed_runs(
            lambda lo, hi: self._read_run_into(keys, view, size, lo, hi), len(keys))

    def _appends_made(self) -> bool:
        """Whether the root has :data:`APPENDS_XATTR`, or cannot tell (no extended
        attributes there): an append may have left a marker."""
        if not self._appends_seen:
            self._appends_seen = _appends_marked(str(self.root))
        return self._appends_seen

    def _read_run_into(self, keys: Sequence[str], view: memoryview, size: int,
                       lo: int, hi: int) -> list[int | None]:
        """:meth:`_read_many_into` of ``keys[lo:hi]``: per file an open, an fstat and one
        preadv into its place, a loop kept tight (a 4 KiB file from the page cache takes
        ~15 us of system calls). Each value is one read of a whole file, atomic per key
        as a get; a file an append marker links, or a short read, takes :meth:`_get`."""
        root, sizes = self._root_prefix, []
        open_, fstat, close, is_file = os.open, os.fstat, os.close, stat.S_ISREG
        for i in range(lo, hi):
            key = keys[i]
            if _MARKERS in key:
                self._file_name(key)        # raises for a marker's name
            try:
                fd = open_(root + key, os.O_RDONLY)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                sizes.append(None)
                continue
            except OSError as e:
                raise _translate(e, key) from e
            try:
                st = fstat(fd)
                if st.st_nlink == 1 and is_file(st.st_mode):
                    n = st.st_size
                    if n != size or _pread_into(fd, view[i * size:(i + 1) * size]) == n:
                        sizes.append(n)
                        continue
            except OSError as e:
                raise _translate(e, key) from e
            finally:
                close(fd)
            self._read_slowly_into(key, view, size, i, sizes)
        return sizes

    def _read_run_unlinked(self, keys: Sequence[str], view: memoryview, size: int,
                           lo: int, hi: int) -> list[int | None]:
        """:meth:`_read_run_into` where no file has a marker: per file an open and one
        preadv of ``size`` + 1 bytes (the value, and a spare byte that is read only if
        the file is longer), no fstat. A file of any other length, or not a regular
        file, takes :meth:`_get` (its place may have been written meanwhile)."""
        root, sizes, spare = self._root_prefix, [], bytearray(1)
        open_, close, read_into = os.open, os.close, _pread_into_spare
        for i in range(lo, hi):
            key = keys[i]
            if _MARKERS in key:
                self._file_name(key)        # raises for a marker's name
            try:
                fd = open_(root + key, os.O_RDONLY)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                sizes.append(None)
                continue
            except OSError as e:
                raise _translate(e, key) from e
            try:
                n = read_into(fd, view[i * size:(i + 1) * size], spare)
            except IsADirectoryError:
                n = -1
            except OSError as e:
                raise _translate(e, key) from e
            finally:
                close(fd)
            if n == size:
                sizes.append(n)
            else:
                self._read_slowly_into(key, view, size, i, sizes)
        return sizes

    def _read_slowly_into(self, key: str, view: memoryview, size: int, i: int,
                          sizes: list[int | None]) -> None:
        """The general path of one key of :meth:`_read_many_into`: :meth:`_get`."""
        value = self._get(key)
        if value is not None and len(value) == size:
            view[i * size:(i + 1) * size] = value
        sizes.append(None if value is None else len(value))

    # -- transactions: a read sees one version of each key; a durable write syncs once ----

    def _begin(self, write: bool) -> Any:
        """A read transaction keeps each file it reads open (the most recent
        :data:`PINNED_FILES` of them), so every later read of that key in the transaction
        reads the same file, at the size first seen: a shard's index and the inner chunks
        it points to come from one version even while a writer renames a new shard over
        it (a ``set``) or appends to it. A snapshot per key, not across keys.

        A durable (``fsync``) write transaction collects the directories its writes
        renamed files into and syncs each once when it ends: every value is durable at
        the commit, as ``Store.set`` promises inside a transaction, and an array write's
        groups of chunks do not each wait for their directory. Not atomic: a crash
        before the end may keep some of its keys new and some old, each whole."""
        if write:
            return _DurableWrite() if self.fsync else None
        return OrderedDict()

    def _commit(self, handle: Any) -> None:
        if type(handle) is _DurableWrite:
            # (after an exception too: what was written is there, so it is made durable)
            _sync_directories(handle.directories)
            return
        while handle:
            os.close(handle.popitem()[1][0])

    _abort = _commit

    def _pins(self) -> OrderedDict | None:
        """The files this thread's read transaction keeps open, or None."""
        handle = self._current_transaction()
        return handle if type(handle) is OrderedDict else None

    def _unsynced(self) -> set[str] | None:
        """Where this thread's durable write transaction collects directories to sync
        at its end, or None (then each write syncs its own)."""
        handle = self._current_transaction()
        return handle.directories if type(handle) is _DurableWrite else None

    # -- writing ---------------------------------------------------------------------------

    def _set(self, key: str, value: bytes) -> None:
        self._write_key(key, value, self._unsynced() if self.fsync else None)

    def _write_key(self, key: str, value: bytes, unsynced: set[str] | None) -> None:
        """Write one key: a temporary file renamed over it. With ``fsync``, the file is
        synced before the rename and the directory after it, unless ``unsynced`` is
        given: a durable batch (:meth:`_set_many`) or write transaction (:meth:`_begin`)
        collects the directories there and syncs each once when all its renames are
        done."""
        # The hot path of many small chunks: plain strings (a Path costs more than the
        # open), a temporary name without a random-number syscall (see _temp_suffix), and
        # the key's directory made only when the first open finds it missing.
        path = self._file_name(key)
        # the last separator: keys use '/', the root's own may be os.sep (Windows)
        cut = path.rfind("/") if os.sep == "/" else max(path.rfind("/"), path.rfind(os.sep))
        directory = path[:cut]
        tmp = f"{path[:cut + 1]}.{path[cut + 1:]}{TEMP_MARKER}{_temp_suffix()}"
        fsync = self.fsync
        for attempt in range(3):
            try:
                try:
                    _write_file(tmp, value, fsync)
                except NotADirectoryError as e:
                    raise InvalidKeyError("a parent of the key is itself a key", key=key) from e
                except FileNotFoundError:
                    # the key's directory is new (or a concurrent erase pruned it)
                    self._make_directory(directory, key, unsynced)
                    _write_file(tmp, value, fsync)
                try:
                    old = os.lstat(path)
                except FileNotFoundError:
                    old = None
                # the old file gets a second name, so that freeing it is not part of
                # the rename (graves.py); one that a marker links keeps its only name
                grave = None
                if (old is not None and old.st_nlink == 1 and stat.S_ISREG(old.st_mode)
                        and path[cut + 1:] not in _NODE_DOCUMENTS):
                    grave = f"{path[:cut + 1]}.{path[cut + 1:]}{TEMP_MARKER}{_temp_suffix()}"
                    try:
                        os.link(path, grave)
                    except OSError:
                        grave = None
                try:
                    os.replace(tmp, path)
                except BaseException:
                    _unlink_quietly(tmp)
                    if grave is not None:
                        _unlink_quietly(grave)
                    raise
                if fsync:                        # makes the rename itself durable
                    if unsynced is None:
                        _fsync_directory(directory)
                    else:
                        unsynced.add(directory)
                if grave is not None:
                    graves.bury(grave, old.st_size,
                                lambda: self._prune_after_grave(directory))
                elif old is not None and old.st_nlink > 1:
                    _drop_stale_markers(Path(path))  # a killed append's marker of the old file
                return
            except FileNotFoundError:
                # A concurrent erase pruned the directory between mkdir and open: retry.
                _unlink_quietly(tmp)
                if attempt == 2:
                    raise
            except IsADirectoryError as e:
                _unlink_quietly(tmp)
                raise InvalidKeyError("key names a directory of other keys", key=key) from e
            except OSError as e:
                _unlink_quietly(tmp)
                raise _translate(e, key) from e

    def _prune_after_grave(self, directory: str) -> None:
        """Once a replaced file's grave is gone: take away the directories that leaves
        empty (an erase of the key meanwhile could not, with the grave in it)."""
        start = Path(directory)
        kept = self._prune(start)
        if kept != start:
            self._removed_from(kept)

    def _make_directory(self, directory: str, key: str, unsynced: set[str] | None) -> None:
        """Make the key's directory and any missing parent. With ``fsync``, the parent of
        each directory made is synced too (or collected in ``unsynced``): a new
        directory's own entry is in its parent, and without that sync a power cut could
        take the directory, and every key written into it, away."""
        made: list[str] = []
        if self.fsync:
            d = directory
            while len(d) > len(self._root_prefix) and not os.path.isdir(d):
                made.append(d)
                d = os.path.dirname(d)
        try:
            os.makedirs(directory, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as e:
            raise InvalidKeyError("a parent of the key is itself a key", key=key) from e
        for d in made:
            parent = os.path.dirname(d)
            if unsynced is None:
                _fsync_directory(parent)
            else:
                unsynced.add(parent)

    def _append(self, key: str, data: bytes, expected_size: int) -> None:
        path = self._path(key)
        for _ in range(_APPEND_ATTEMPTS):
            try:
                fd = os.open(path, os.O_RDWR)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                raise no_append_target(key) from None
            except PermissionError as e:
                raise UnsupportedOperationError(
                    "the file cannot be opened for writing in place", key=key) from e
            except OSError as e:
                raise _translate(e, key) from e
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)   # released when fd is closed
                st = os.fstat(fd)
                try:
                    now = os.stat(path)
                except FileNotFoundError:
                    raise AppendConflictError("the value was erased during the append",
                                              key=key) from None
                if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
                    continue          # a set replaced the file meanwhile: append to that one
                if not stat.S_ISREG(st.st_mode):
                    raise no_append_target(key)
                size = st.st_size if st.st_nlink == 1 else self._recover(path, fd, st, key)
                if size is None:
                    continue          # a set is replacing the file: append to the new one
                check_append_size(key, size, expected_size)
                if data:
                    self._append_marked(path, fd, size, data, key)
                return
            except KvzarrError:
                raise
            except OSError as e:
                raise _translate(e, key) from e
            finally:
                os.close(fd)
        raise AppendConflictError("the value was replaced again and again during the append",
                                  key=key)

    def _append_marked(self, path: Path, fd: int, size: int, data: bytes, key: str) -> None:
        """Write ``data`` at ``size`` under the marker that records ``size`` (the lock is
        held). A failed write takes the file back to ``size`` before the marker goes."""
        marker = path.with_name(f".{path.name}{APPEND_MARKER}{size}")
        self._mark_appends(key)
        _make_marker(path, marker, key)
        try:
            if self.fsync:
                _fsync_directory(path.parent)   # the marker is on disk before the data
            _pwrite_all(fd, data, size)
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            try:                                 # back to the old value, then no marker
                os.ftruncate(fd, size)
                os.unlink(marker)
            except OSError:
                pass        # the marker stays: readers see the old value, the next append repairs
            raise
        os.unlink(marker)
        if self.fsync:
            _fsync_directory(path.parent)       # the append is not undone after a power cut

    def _mark_appends(self, key: str) -> None:
        """Set the root's :data:`APPENDS_XATTR` if it is not set (on disk first, with
        ``fsync``): from then on every bulk read of this root checks link counts. Where
        the root has no extended attributes readers always check them, and nothing is
        set; where the mark cannot be set for another reason the append is refused (a
        marker without it could be served torn): UnsupportedOperationError, after which
        kvzarr's shard writer rewrites the shard instead."""
        if not hasattr(os, "setxattr"):
            return                      # (not Linux) readers always check link counts
        root = str(self.root)
        try:
            os.getxattr(root, APPENDS_XATTR)
            return
        except OSError as e:
            if e.errno in _NO_XATTRS:
                return                  # no attributes here: readers check link counts
        try:
            os.setxattr(root, APPENDS_XATTR, b"1")
        except OSError as e:
            if e.errno in _NO_XATTRS:
                return
            raise UnsupportedOperationError(
                f"the store's root cannot be marked for appends ({e.strerror})",
                key=key) from e
        if self.fsync:
            _fsync_directory(root)

    def _recover(self, path: Path, fd: int, st: os.stat_result, key: str) -> int | None:
        """With the lock held on a file that has more than one link: undo a killed append
        (truncate to the size its marker records, then remove the marker) and return the
        value's size. Other hard links to the file (made by someone else) would see an
        append in place: refused, so the caller falls back to rewriting the value. None
        when the other link is the grave of a set replacing the file (graves.py): the
        caller starts again on the file the set puts there."""
        sizes = _markers_of(path, st)
        size = st.st_size
        if sizes:
            size = min(s for s, _ in sizes)
            os.ftruncate(fd, size)
            if self.fsync:
                os.fsync(fd)
            for _, marker in sizes:
                _unlink_quietly(marker)
            if self.fsync:
                _fsync_directory(path.parent)
        if os.fstat(fd).st_nlink > 1:
            if _has_grave(path, st):
                return None
            raise UnsupportedOperationError(
                "the file has other hard links, which an append in place would change too",
                key=key)
        return size

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        # File reads release the GIL: a batch goes through the worker threads so the
        # disk and the page cache work in parallel, in a few groups of keys (a task per
        # key would cost more than reading a small file).
        return workers.map_grouped(self._get, keys, parallel=len(keys) >= _PARALLEL_FILES)

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        # The items are written on several threads, so a key given twice could end with
        # either value: keep only its last one, as sequential sets would.
        if len({key for key, _ in items}) != len(items):
            items = list(dict(items).items())
        if not self.fsync:
            set_one = self._set
            workers.map_grouped(lambda kv: set_one(*kv), items,
                                parallel=len(items) >= _PARALLEL_FILES)
            return
        # Durable: the files are written and synced by the threads that wait for the
        # disk (workers.SYNC_POOL), several syncs at once, and each directory is synced
        # once, after the last rename into it, instead of once per key: when this
        # returns, or when the write transaction it is part of ends (see _begin). Every
        # key is still replaced atomically.
        outer = self._unsynced()
        unsynced = set() if outer is None else outer
        write = self._write_key
        workers.map_waiting(lambda kv: write(kv[0], kv[1], unsynced), items)
        if outer is None:
            _sync_directories(unsynced)

    def _exists_many(self, keys: Sequence[str]) -> list[bool]:
        # One stat per key, no file opened nor read (a group listing asks this of every
        # child's zarr.json); a stat is cheaper than handing it to a thread.
        return [self._exists(k) for k in keys]

    def _erase(self, key: str) -> None:
        path = self._path(key)
        try:
            old = os.lstat(path)
            if stat.S_ISDIR(old.st_mode):
                return
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            return
        except IsADirectoryError:
            return
        except OSError as e:
            raise _translate(e, key) from e
        if old.st_nlink > 1:
            _drop_stale_markers(path)
        self._removed_from(self._prune(path.parent))

    def _prune(self, directory: Path) -> Path:
        """Remove directories left empty, up to (not including) the root; return the
        first directory kept (the one whose entry of the removed ones changed)."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return directory
            directory = directory.parent
        return directory

    def _removed_from(self, directory: Path) -> None:
        """With ``fsync``, make the removal of an entry of ``directory`` durable: now,
        or when this thread's write transaction ends (see :meth:`_begin`). Without it a
        power cut could bring an erased key back."""
        if not self.fsync:
            return
        unsynced = self._unsynced()
        if unsynced is None:
            _fsync_directory_if_there(str(directory))
        else:
            unsynced.add(str(directory))

    def _erase_prefix(self, prefix: str) -> None:
        if not prefix:
            for child in list(self.root.iterdir()) if self.root.exists() else []:
                if child.name == LOCK_DIR:
                    continue    # other writers may hold locks in it right now
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, onerror=_tolerate_vanished)
                else:
                    _unlink_quietly(child)
            self._removed_from(self.root)
            return
        target = self.root / prefix[:-1]
        try:
            is_dir = stat.S_ISDIR(os.stat(target).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as e:
            raise _translate(e, prefix) from e
        if is_dir:
            shutil.rmtree(target, onerror=_tolerate_vanished)
            self._removed_from(self._prune(target.parent))

    def _exists(self, key: str) -> bool:
        try:
            return stat.S_ISREG(os.stat(self._file_name(key)).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as e:
            raise _translate(e, key) from e

    def _getsize(self, key: str) -> int | None:
        pins = self._pins()
        if pins and key in pins:
            return pins[key][1]       # the size of the version this transaction reads
        path = self._file_name(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise _translate(e, key) from e
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size if st.st_nlink == 1 else _size_before_append(
            Path(path), st, lambda: os.stat(path), key)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        # The keys under a prefix live under the directory named by the prefix up to its
        # last '/', so only that subtree is walked.
        cut = prefix.rfind("/")
        base = prefix[:cut + 1]
        start = self.root / base if base else self.root
        keys = [k for k in self._walk(start, base) if k.startswith(prefix)]
        keys.sort()
        return iter(keys)

    def _walk(self, directory: Path, rel: str) -> Iterator[str]:
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as e:
            raise _translate(e, rel) from e
        for entry in entries:
            if _hidden(entry.name):
                continue
            if entry.is_dir(follow_symlinks=False):
                yield from self._walk(Path(entry.path), f"{rel}{entry.name}/")
            elif entry.is_file():
                yield rel + entry.name

    def _list_dir(self, prefix: str) -> Iterator[str]:
        directory = self.root / prefix[:-1] if prefix else self.root
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return iter(())
        except OSError as e:
            raise _translate(e, prefix) from e
        names = []
        for entry in entries:
            if _hidden(entry.name):
                continue
            if entry.is_dir(follow_symlinks=False):
                names.append(entry.name + "/")
            elif entry.is_file():
                names.append(entry.name)
        names.sort()
        return iter(names)

    def __repr__(self) -> str:
        return f"FilesystemStore({str(self.root)!r})"


class _DurableWrite:
    """The handle of a durable write transaction: the directories to sync at its end."""

    __slots__ = ("directories",)

    def __init__(self, directories: set[str] | None = None) -> None:
        self.directories: set[str] = set() if directories is None else directories


def _make_marker(path: Path, marker: Path, key: str) -> None:
    """Link ``marker`` to the key's file (UnsupportedOperationError where the filesystem
    has no hard links)."""
    for attempt in range(2):
        try:
            os.link(path, marker)
            return
        except FileExistsError:
            if attempt:
                raise
            _unlink_quietly(marker)      # stale: it names a file a set has replaced
        except OSError as e:
            if e.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK,
                           errno.ENOSYS):
                raise UnsupportedOperationError(
                    f"this filesystem cannot make the hard link that marks an append "
                    f"({e.strerror})", key=key) from e
            raise


def _markers_of(path: Path, st: os.stat_result) -> list[tuple[int, Path]]:
    """(recorded size, marker path) of every append marker of ``path`` that links the
    file ``st`` describes."""
    return [(int(rest), Path(marker)) for rest, marker, mst in _siblings(path, APPEND_MARKER)
            if rest.isdigit() and os.path.samestat(mst, st)]


def _siblings(path: Path, marker: str) -> list[tuple[str, str, os.stat_result]]:
    """(rest of the name, path, ``lstat``) of every file beside ``path`` named
    ``.<its name><marker>...`` (its temporary files and graves, or its append markers)
    that is there now; none when its directory is gone."""
    prefix = f".{path.name}{marker}"
    try:
        entries = list(os.scandir(path.parent))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        if entry.name.startswith(prefix):
            try:
                found.append((entry.name[len(prefix):], entry.path, os.lstat(entry.path)))
            except FileNotFoundError:
                continue
    return found


def _size_before_append(path: Path, st: os.stat_result,
                         restat: Callable[[], os.stat_result], key: str) -> int:
    """The size of the value in the file ``st`` describes, which had more than one link:
    the size its append marker records (an append is running or was killed), else the
    file's size once it is seen twice with the same links and size (the other links are
    not ours). ``restat`` stats the same file again: an append that ends between the
    stat and the look at the markers takes its marker away, and the size seen before was
    the size of a half-written append."""
    for _ in range(_APPEND_ATTEMPTS * 3):
        if st.st_nlink == 1:
            return st.st_size
        sizes = _markers_of(path, st)
        if sizes:
            return min(s for s, _ in sizes)
        again = restat()
        if (again.st_nlink, again.st_size) == (st.st_nlink, st.st_size):
            return st.st_size
        st = again
    raise StoreError("the value kept changing while its size was read", key=key)


#: getxattr's "no such attribute" (ENODATA on Linux, ENOATTR elsewhere)
_NO_ATTRIBUTE = {getattr(errno, name) for name in ("ENODATA", "ENOATTR")
                 if hasattr(errno, name)}
#: "this filesystem has no extended attributes"
_NO_XATTRS = {getattr(errno, name) for name in ("ENOTSUP", "EOPNOTSUPP")
              if hasattr(errno, name)}


def _appends_marked(root: str) -> bool:
    """Whether ``root`` has :data:`APPENDS_XATTR`, or may have it: True unless the
    attribute is certainly absent (or the root is: then there is no file either)."""
    if not hasattr(os, "getxattr"):
        return True
    try:
        os.getxattr(root, APPENDS_XATTR)
    except OSError as e:
        return not (e.errno in _NO_ATTRIBUTE or e.errno == errno.ENOENT)
    return True


def _has_grave(path: Path, st: os.stat_result) -> bool:
    """Whether a set is replacing the file ``st`` describes: its grave (the second name
    a set gives the file it replaces, see graves.py) links it."""
    return any(os.path.samestat(gst, st) for _, _, gst in _siblings(path, TEMP_MARKER))


def _drop_stale_markers(path: Path) -> None:
    """Remove the append markers of ``path``'s name that no longer link the key's file
    (a set or erase replaced it): they would keep the old bytes alive. A marker still in
    use by a running append links a file that is gone from the key; removing it is safe.
    (The markers are looked at before the key's file: a marker linking another file
    than the one found after it links a file gone from the key.)"""
    markers = _siblings(path, APPEND_MARKER)
    try:
        current = os.lstat(path)
    except FileNotFoundError:
        current = None
    for _, marker, mst in markers:
        if current is None or not os.path.samestat(mst, current):
            _unlink_quietly(Path(marker))


def _write_file(path: str, value: bytes, fsync: bool) -> None:
    """A new file holding ``value`` (raises FileNotFoundError when its directory is missing)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        _pwrite_all(fd, value, 0)
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(path)
        raise
    os.close(fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


if hasattr(os, "preadv"):
    def _pread_into(fd: int, place: memoryview) -> int:
        """Bytes read from the start of the file into ``place``, no copy in between."""
        return os.preadv(fd, [place], 0)

    def _pread_into_spare(fd: int, place: memoryview, spare: bytearray) -> int:
        """Bytes read from the start of the file into ``place``, then into ``spare``:
        ``len(place)`` means the file is exactly that long (more fills the spare)."""
        return os.preadv(fd, [place, spare], 0)
else:   # (Windows)
    def _pread_into(fd: int, place: memoryview) -> int:
        data = os.pread(fd, len(place), 0)
        place[:len(data)] = data
        return len(data)

    def _pread_into_spare(fd: int, place: memoryview, spare: bytearray) -> int:
        data = os.pread(fd, len(place) + len(spare), 0)
        if len(data) == len(place):
            place[:] = data
        return len(data)


def _read_whole(fd: int, size: int) -> bytes:
    return _pread_exactly(fd, size, 0)


def _pread_exactly(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes at ``offset`` (fewer only if the file is shorter)."""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts, got = [data], len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _tolerate_vanished(function: object, path: str, exc_info: tuple) -> None:
    """rmtree error handler: a file a concurrent eraser removed first is fine; any other
    failure is reported, never swallowed."""
    error = exc_info[1]
    if isinstance(error, FileNotFoundError):
        return
    raise _translate(error, path) from error


def _fsync_directory(directory: str | Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directories(directories: set[str]) -> None:
    """Sync each of ``directories`` that still exists, several at once."""
    workers.map_waiting(_fsync_directory_if_there, sorted(directories))


def _fsync_directory_if_there(directory: str) -> None:
    """Sync a directory written into earlier, unless it is gone: an erase since then
    (in this transaction or another process) emptied and removed it, and nothing
    written there is left to make durable."""
    try:
        _fsync_directory(directory)
    except FileNotFoundError:
        pass


def _unlink_quietly(path: str | Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _translate(error: OSError, key: str) -> KvzarrError:
    """The one place filesystem errors become kvzarr errors."""
    if error.errno == errno.ENAMETOOLONG:
        # the same answer as max_segment_bytes gives, where the OS's limits are lower
        # (a shorter NAME_MAX, or a path past PATH_MAX)
        return InvalidKeyError("the key is too long for a path on this filesystem",
                               key=key)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError("no space left on device; the key keeps its old value", key=key)
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorePermissionError(f"the filesystem refused access: {error.strerror}; "
                                    f"the key keeps its old value", key=key)
    return StoreError(f"filesystem error: {error.strerror or error}", key=key)
