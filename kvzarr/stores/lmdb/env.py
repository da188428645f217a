"""One LMDB environment per file per process, shared by every LMDBStore on that file
(stores/lmdb.md, "Concurrency").

LMDB forbids opening one environment twice in a process (its fcntl locks belong to the
process, and closing a second handle drops them) and using it across ``fork()``. So:

* a registry keyed by the real path hands every store on a file the same
  :class:`SharedEnv`, opened once and closed with its last store;
* the owning process id is remembered; a child that inherited the environment reopens it
  before its first operation and never touches the parent's transactions;
* the map is resized (grown on demand, or adopted after another process grew it) only
  while no transaction of this process is open: :class:`_Gate` counts them;
* writers of this process are serialised by a thread lock, writers of all processes by
  ``flock`` on the data file, held for a whole write transaction so that a transaction
  that must grow the map can abort, grow and replay without another writer getting in;
* with ``write_map`` (LMDB's ``MDB_WRITEMAP``: a writer changes pages in the shared map
  instead of copying them into the file at commit) LMDB sets the file's length to the
  map size whenever it maps. Two rules keep that safe: every map change of every kvzarr
  process happens under ``flock`` on the lock file and never makes the file shorter
  (a shorter file under another process's writes would kill it with SIGBUS), and the
  file is backed by allocated disk blocks before it is mapped longer (a write through
  the map into a hole on a full disk is a SIGBUS too, not an error). Where the blocks
  cannot be allocated, the process writes through the file instead (no write map).

Every py-lmdb exception becomes a kvzarr error in :func:`_translate`, and only there.
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import lmdb

from ...errors import (ReadOnlyError, StoreConfigError, StoreError, StoreFullError,
                       StorePermissionError)
from ...runtime.process import current_pid
from .meta import MetaPages, check_data_file

try:
    import fcntl
except ImportError:  # Windows: no flock; replays are still checked, see _Writer
    fcntl = None  # type: ignore[assignment]

#: disk space left free when allocating the map
_FREE_MARGIN = 64 << 20

#: the most of an existing file's holes that opening it with a write map fills
_SPARSE_LIMIT = 64 << 20

#: the most the map grows by at once (unless one transaction needs more)
_GROW_STEP = 1 << 30

#: Durability names -> (sync, metasync) flags of LMDB.
DURABILITY = {"full": (True, True), "relaxed": (True, False), "none": (False, False)}


def default_write_map(durability: str, write_map: bool | None) -> bool:
    """``write_map`` as given, or when None: on where no commit waits for write-back
    (durability "none": the map saves a copy of each page), off where one does (a page
    changed through the map is written back as its whole page-cache folio, up to 2 MiB;
    stores/lmdb.md, "Write map")."""
    return durability == "none" if write_map is None else bool(write_map)


def _disk_nearly_full(path: str) -> bool:
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)) or ".")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 16 * 1024 * 1024


def _translate(error: BaseException, *, key: str | None = None,
               path: str | None = None) -> BaseException:
    """The one place py-lmdb (and OS) errors become kvzarr errors."""
    if isinstance(error, (StoreError, ReadOnlyError)):
        return error
    if isinstance(error, lmdb.MapFullError):
        return StoreFullError(
            "the LMDB map is full at its largest allowed size; nothing of the failed "
            "transaction was written", key=key, path=path,
            hint="open the store with a larger map_size_max")
    if (isinstance(error, lmdb.DiskError)
            or isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)):
        return StoreFullError("no space left on device; nothing of the failed "
                              "transaction was written", key=key, path=path)
    if isinstance(error, lmdb.Error) and "Input/output error" in str(error) and \
            path is not None and _disk_nearly_full(path):
        # LMDB reports a failed write of its pages as EIO; on a full disk that is ENOSPC.
        return StoreFullError("no space left on device (LMDB could not write its pages); "
                              "nothing of the failed transaction was written",
                              key=key, path=path)
    if isinstance(error, lmdb.ReadonlyError):
        return ReadOnlyError(f"LMDB refused access: {error}", key=key, path=path)
    if isinstance(error, lmdb.ReadersFullError):
        return StoreError("too many open LMDB read transactions", key=key, path=path,
                          hint="open the store with a larger max_readers")
    if isinstance(error, (lmdb.InvalidError, lmdb.VersionMismatchError)):
        return StoreError(f"not an LMDB environment this library can read: {error}",
                          key=key, path=path)
    if isinstance(error, (lmdb.CorruptedError, lmdb.PanicError, lmdb.PageNotFoundError)):
        return StoreError(f"the LMDB environment is damaged: {error}", key=key, path=path)
    if isinstance(error, LookupError):
        return StoreError(str(error), key=key, path=path)
    if isinstance(error, OSError) and error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorePermissionError(f"the filesystem refused access to the LMDB files: "
                                    f"{error.strerror}", key=key, path=path)
    if isinstance(error, OSError):
        return StoreError(f"LMDB file error: {error.strerror or error}", key=key, path=path)
    return StoreError(f"LMDB error: {error}", key=key, path=path)


class _Gate:
    """Counts this process's open transactions; :meth:`exclusive` waits until none is
    open and holds new ones back, because LMDB remaps the file on a resize."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._active = 0
        self._resizing = False
        self._mine = threading.local()

    @property
    def active(self) -> int:
        return self._active

    def enter(self) -> None:
        mine = getattr(self._mine, "n", 0)
        with self._cond:
            # A thread that already holds a transaction goes on: the resize waits for
            # that one anyway, and holding it back would deadlock.
            while self._resizing and not mine:
                self._cond.wait()
            self._active += 1
        self._mine.n = mine + 1

    def leave(self) -> None:
        self._mine.n -= 1
        with self._cond:
            self._active -= 1
            if not self._active and self._resizing:   # only a resize waits for zero
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        if getattr(self._mine, "n", 0):
            raise StoreError(
                "the LMDB map must be resized, but this thread holds another open "
                "transaction on the same file", hint="finish that transaction first")
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()


class SharedEnv:
    """An open LMDB environment and the process-wide state that goes with it."""

    def __init__(self, path: str, *, subdir: bool, read_only: bool, lock: bool,
                 durability: str, map_size_start: int, map_size_max: int,
                 max_readers: int, write_map: bool) -> None:
        self.path = path
        self.write_map_option = write_map
        #: MDB_WRITEMAP in use (needs a way to allocate blocks and a sparse-file OS)
        self.write_map = (write_map and not read_only and sys.platform.startswith("linux")
                          and hasattr(os, "posix_fallocate"))
        self.subdir = subdir
        self.read_only = read_only
        self.lock = lock
        self.durability = durability
        self.map_size_start = map_size_start
        self.map_size_max = map_size_max
        self.max_readers = max_readers
        self.data_file = os.path.join(path, "data.mdb") if subdir else path
        self.lock_file = os.path.join(path, "lock.mdb") if subdir else path + "-lock"
        self._map_lock_fd: int | None = None
        self._meta: MetaPages | None = None
        self.refs = 0
        #: bumped on every (re)open; transactions remember it to detect a stale env
        self.generation = 0
        self._lock_fd: int | None = None
        self._open()

    # -- opening, forks ------------------------------------------------------------------

    def _open(self) -> None:
        # before LMDB maps the file: a file shorter than its meta pages say would crash
        # the process on the first read (meta.py)
        check_data_file(self.data_file, self.path)
        try:
            if not self._open_env() and self.write_map:
                # No disk blocks for the map (full disk): write through the file instead.
                self.env.close()
                self.write_map = False
                self._open_env()
            try:
                if self.lock:
                    self.env.reader_check()    # clear slots of readers that died
                self.psize = mmap.PAGESIZE    # LMDB's page size; stat() below confirms
                for attempt in range(20):
                    try:
                        # opening the database begins a transaction: another process
                        # may have grown the file since it was mapped
                        self.db = self.env.open_db()
                        break
                    except lmdb.MapResizedError:
                        if attempt == 19:
                            raise
                        with self._map_change():
                            self._adopt()
                self.psize = self.env.stat()["psize"]
            except BaseException:
                self.env.close()
                raise
            # The map it replaces (the parent's after a fork, the read-only one's after
            # reopen_writable) is dropped, not closed: another thread may be reading it
            # (change_counter's hot path); it is unmapped with its last reference.
            self._meta = MetaPages.open(self.data_file, self.psize, self.env)
        except lmdb.Error as e:
            raise _translate(e, path=self.path) from e
        self.pid = current_pid()
        self.generation += 1
        self._reset_sync()

    def _open_env(self) -> bool:
        """Open ``self.env``; False if the write map could not be backed by disk blocks."""
        sync, metasync = DURABILITY[self.durability]
        with self._map_change():
            for attempt in range(20):
                # Without a write map the file holds just the data: start with room
                # beyond it, so the map covers what other processes write meanwhile
                # (they can still grow it while this opens: retry). With one, the file
                # is as long as the last map already.
                size = _size_of(self.data_file)
                room = size if self.write_map else 2 * size
                map_size = min(self.map_size_max, max(self.map_size_start, room))
                try:
                    self.env = lmdb.open(
                        self.path, subdir=self.subdir, readonly=self.read_only,
                        lock=self.lock, sync=sync, metasync=metasync,
                        map_size=max(map_size, size), writemap=self.write_map,
                        meminit=False, max_readers=self.max_readers, max_dbs=0,
                        max_spare_txns=0, create=not self.read_only)
                    break
                except lmdb.MapResizedError:
                    if attempt == 19:
                        raise
            # A file mostly made of holes was written by another program's write map
            # (zarr-python 2 maps 1 TiB): write through the file rather than fill them.
            # (A new file keeps its two meta pages.)
            return not self.write_map or self._allocate(
                self.env.info()["map_size"], max(size, 2 * mmap.PAGESIZE),
                at_most=_SPARSE_LIMIT)

    @contextmanager
    def _map_change(self) -> Iterator[None]:
        """Hold the inter-process lock under which write-map processes change the map
        size (and with it the file's length). Others need none: they never set it."""
        if not self.write_map or not self.lock or fcntl is None:
            yield
            return
        try:
            if self._map_lock_fd is None:
                self._map_lock_fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT
                                            | getattr(os, "O_CLOEXEC", 0), 0o644)
            fcntl.flock(self._map_lock_fd, fcntl.LOCK_EX)
        except OSError as e:
            raise _translate(e, path=self.path) from e
        try:
            yield
        finally:
            fcntl.flock(self._map_lock_fd, fcntl.LOCK_UN)

    def _allocate(self, size: int, old_size: int, at_most: int | None = None) -> bool:
        """Back the first ``size`` bytes of the data file with disk blocks; on failure
        (full disk, or more than ``at_most`` bytes to allocate) give the file back its
        ``old_size`` and return False."""
        try:
            fd = os.open(self.data_file, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return False
        try:
            try:
                # Never try what cannot fit: a failed fallocate may keep what it got.
                missing = size - os.fstat(fd).st_blocks * 512
                free = os.statvfs(self.data_file)
                if (missing <= free.f_bavail * free.f_frsize - _FREE_MARGIN
                        and (at_most is None or missing <= at_most)):
                    os.posix_fallocate(fd, 0, size)
                    return True
            except OSError:
                pass
            # Every byte of the file stays allocated: take back what LMDB or a failed
            # fallocate added (no process maps past the old length: we hold the lock).
            try:
                if os.fstat(fd).st_size > old_size:
                    os.ftruncate(fd, old_size)
            except OSError:
                pass
            return False
        finally:
            os.close(fd)

    def _reset_sync(self) -> None:
        self.gate = _Gate()
        self.write_lock = threading.Lock()
        self._lock_fd = None

    def check_fork(self) -> None:
        """Reopen the environment in a child process before it is used there."""
        if current_pid() != self.pid:
            self._reopen_after_fork()

    def _reopen_after_fork(self) -> None:
        # The inherited handle must be closed before py-lmdb lets the file be opened
        # again. Closing it aborts the transactions py-lmdb knows of, which would free
        # reader slots the parent still uses; so it is only closed when none was open
        # (and no ended transaction is cached: max_spare_txns=0 at open).
        if not self._drop_inherited():
            raise StoreError(
                "the process forked while a transaction on this LMDB file was open, so "
                "the child cannot reopen it", path=self.path,
                hint="fork before opening transactions, or use the 'spawn' start method")
        self._open()

    def _drop_inherited(self) -> bool:
        """Close the handle inherited from the parent if that is safe; report whether
        it was closed."""
        self._close_lock_files()   # our copies only; the parent keeps its flocks
        if self.gate.active:
            return False
        try:
            self.env.close()
        except lmdb.Error:
            pass
        return True

    def reopen_writable(self) -> None:
        """Reopen an environment opened read-only so that it can write: a process may
        open an LMDB file only once (see the module docstring), so a writable store on a
        file this process has open read-only takes over its environment. The read-only
        stores on it go on reading through it (their own flag still refuses writes).
        Waits for this process's open transactions to end; StoreError if the calling
        thread holds one. If the file cannot be opened writable (permissions), the
        environment is opened read-only again and the error is raised."""
        gate, write_lock = self.gate, self.write_lock
        if getattr(gate._mine, "n", 0):
            raise StoreError(
                "this LMDB file is open read-only in this process and this thread holds "
                "a transaction on it, so it cannot be reopened writable now",
                path=self.path, hint="open the writable store outside that transaction")
        with gate.exclusive():        # no transaction of this process is open
            self.env.close()
            self.read_only = False
            self.write_map = (self.write_map_option and sys.platform.startswith("linux")
                              and hasattr(os, "posix_fallocate"))
            try:
                self._open()
            except BaseException:
                self.read_only, self.write_map = True, False
                self._open()
                raise
            finally:
                # _open() makes new locks for a forked child; the threads of this process
                # may be waiting on these, so they stay
                self.gate, self.write_lock = gate, write_lock

    def after_fork_in_child(self) -> None:
        # Locks copied from the parent may be held by threads that do not exist here.
        active = self.gate.active
        fd = self._lock_fd
        self._reset_sync()
        self.gate._active = active
        self._lock_fd = fd

    def last_txnid(self) -> int:
        """The id of the last committed transaction (stores/lmdb.md, "Change counter"):
        from the meta pages, or from LMDB where they cannot be read directly."""
        meta = self._meta
        if meta is not None:
            return meta.last_txnid()
        try:
            return self.env.info()["last_txnid"]
        except lmdb.Error as e:
            raise _translate(e, path=self.path) from e

    # -- transactions --------------------------------------------------------------------

    def begin(self, write: bool, buffers: bool = True) -> Any:
        """A new transaction, counted by the gate. Adopts a map another process grew."""
        while True:
            self.gate.enter()
            try:
                return self.env.begin(write=write, buffers=buffers)
            except lmdb.MapResizedError:
                self.gate.leave()
                self.adopt_map_size()
            except BaseException:
                self.gate.leave()
                raise

    def end(self, txn: Any, commit: bool = False) -> None:
        """Commit or abort ``txn`` and uncount it; the count drops also when it fails."""
        try:
            if commit:
                txn.commit()
            else:
                txn.abort()
        finally:
            self.gate.leave()

    def adopt_map_size(self) -> None:
        with self.gate.exclusive(), self._map_change():
            self._adopt()

    def _adopt(self) -> None:
        """Map what other processes have grown the map to."""
        if not self.write_map:
            self.env.set_mapsize(0)        # the size in the last commit
            return
        # The last commit's size may be below the file's length (a process that grew
        # it has not committed yet): never map, and so cut the file, shorter.
        info = self.env.info()
        needed = (info["last_pgno"] + 1) * self.psize
        target = max(info["map_size"], needed, _size_of(self.data_file))
        if target != info["map_size"]:
            self.env.set_mapsize(target)

    def lacks_room(self, size: int) -> bool:
        """Whether ``size`` more bytes may not fit in the map (and it can still grow)."""
        info = self.env.info()
        if info["map_size"] >= self.map_size_max:
            return False
        return size > info["map_size"] - (info["last_pgno"] + 1) * self.psize

    def grow(self, pending: int, headroom: int = 2) -> None:
        """Enlarge the map for a write that did not fit. ``pending`` estimates the bytes
        the retried transaction writes: the map gets room for ``headroom`` times that
        (1 where it is a caller's own estimate of all it will write). Raises
        StoreFullError at ``map_size_max``."""
        with self.gate.exclusive(), self._map_change():
            before = self.env.info()["map_size"]
            self._adopt()                  # take what other processes have grown to
            info = self.env.info()
            current = info["map_size"]
            used = (info["last_pgno"] + 1) * self.psize
            # Double, but by at most _GROW_STEP at a time: with a write map the whole
            # map is allocated on disk.
            room = headroom * pending if headroom > 1 else pending + pending // 8
            want = max(before + min(before, _GROW_STEP), used + room + (1 << 20), current)
            target = min(self.map_size_max, want)
            if target <= before:
                raise StoreFullError(
                    f"the LMDB map is full at map_size_max={self.map_size_max} bytes; "
                    "nothing of the failed transaction was written", path=self.path,
                    hint="open the store with a larger map_size_max")
            if target != current:
                if self.write_map and not self._allocate(target, _size_of(self.data_file)):
                    raise StoreFullError(
                        "no space left on device to grow the LMDB map; nothing of the "
                        "failed transaction was written", path=self.path)
                self.env.set_mapsize(target)

    # -- the inter-process writer lock ---------------------------------------------------

    def acquire_writer(self) -> None:
        self.write_lock.acquire()
        try:
            if fcntl is not None:
                if self._lock_fd is None:
                    self._lock_fd = os.open(self.data_file,
                                            os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        except BaseException as e:
            self.write_lock.release()
            if isinstance(e, OSError):
                raise _translate(e, path=self.path) from e
            raise

    def release_writer(self) -> None:
        try:
            if fcntl is not None and self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        finally:
            self.write_lock.release()

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        if current_pid() != self.pid:
            self._drop_inherited()
            return
        self.env.close()
        self._close_lock_files()
        if self._meta is not None:
            self._meta.close()
            self._meta = None

    def _close_lock_files(self) -> None:
        for name in ("_lock_fd", "_map_lock_fd"):
            fd = getattr(self, name)
            if fd is not None:
                _close_quietly(fd)
                setattr(self, name, None)


def _size_of(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


# --- the registry ---------------------------------------------------------------------

_registry: dict[str, SharedEnv] = {}
_registry_lock = threading.Lock()


def acquire(path: str, **options: Any) -> SharedEnv:
    """The shared environment of ``path``, opened on first use."""
    key = os.path.realpath(path)
    with _registry_lock:
        shared = _registry.get(key)
        if shared is not None:
            shared.check_fork()
            for name, attr in (("durability", "durability"), ("lock", "lock"),
                               ("write_map", "write_map_option")):
                if options[name] != getattr(shared, attr):
                    raise StoreConfigError(
                        f"this LMDB file is already open in this process with "
                        f"{name}={getattr(shared, attr)!r}", path=path, field=name)
            if options["read_only"] is False and shared.read_only:
                shared.reopen_writable()
        else:
            shared = SharedEnv(path, **options)
            _registry[key] = shared
        shared.refs += 1
        return shared


def release(shared: SharedEnv) -> None:
    with _registry_lock:
        shared.refs -= 1
        if shared.refs > 0:
            return
        for key, value in list(_registry.items()):
            if value is shared:
                del _registry[key]
    shared.close()


def _after_fork_in_child() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for shared in list(_registry.values()):
        shared.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def default_map_size_max() -> int:
    """1 TiB of address space on 64-bit systems (the file stays sparse where the OS
    allows; LMDB preallocates the map on Windows, which growing on demand avoids)."""
    return 1 << 40 if sys.maxsize > 2 ** 32 else 1 << 30

