"""FilesystemStore: one file per key under a root directory, per the Zarr v3 filesystem
store spec (seeds/zarr-specs/docs/v3/stores/filesystem). Specification: stores/filesystem.md.

Every write is atomic per key: the value goes to a temporary file in the key's directory
and is renamed over the key, so a reader or a crash sees the old value or the new one,
never a torn file. There is no atomicity across keys; ``transaction()`` only groups work.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import InvalidKeyError, StoreError, StoreFullError, ValueTypeError
from .byteranges import ByteRequest, OffsetRequest, RangeRequest, SuffixRequest
from ..runtime import workers
from .base import Capabilities, Store

#: Temporary files carry this marker in their name; listings never show them.
TEMP_MARKER = ".kvzarr-tmp-"



class FilesystemStore(Store):
    # Partial writes use the base read-modify-write, whose _set is copy-and-rename: the
    # per-key atomicity promise holds for them too.
    capabilities = Capabilities(partial_reads=True, partial_writes=True, multi_process=True)

    def __init__(self, root: str | os.PathLike, *, read_only: bool = False,
                 fsync: bool = False) -> None:
        """``fsync=True`` flushes each value to disk before it replaces the old one
        (durable across power loss, slower); the default matches other Zarr filesystem
        stores: atomic per key, durable once the OS writes back."""
        super().__init__(read_only=read_only)
        self.root = Path(root).absolute()
        self.fsync = fsync
        if not read_only:
            self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if TEMP_MARKER in key:
            raise InvalidKeyError(f"keys may not contain {TEMP_MARKER!r}", key=key)
        return self.root / key

    def _get(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise _translate(e, key) from e

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        try:
            with open(self._path(key), "rb") as f:
                if isinstance(request, RangeRequest):
                    f.seek(request.start)
                    return f.read(request.end - request.start)
                if isinstance(request, OffsetRequest):
                    f.seek(request.offset)
                    return f.read()
                if isinstance(request, SuffixRequest):
                    if request.suffix == 0:
                        return b""
                    size = os.fstat(f.fileno()).st_size
                    f.seek(max(0, size - request.suffix))
                    return f.read()
                raise ValueTypeError(f"not a byte request: {request!r}")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise _translate(e, key) from e

    def _set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        tmp = path.with_name(f".{path.name}{TEMP_MARKER}{uuid.uuid4().hex}")
        for attempt in range(3):
            try:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except (FileExistsError, NotADirectoryError) as e:
                    raise InvalidKeyError("a parent of the key is itself a key", key=key) from e
                try:
                    with open(tmp, "wb") as f:
                        f.write(value)
                        if self.fsync:
                            f.flush()
                            os.fsync(f.fileno())
                    os.replace(tmp, path)
                    if self.fsync:
                        _fsync_directory(path.parent)  # makes the rename itself durable
                except BaseException:
                    _unlink_quietly(tmp)
                    raise
                return
            except FileNotFoundError:
                # A concurrent erase pruned the directory between mkdir and open: retry.
                if attempt == 2:
                    raise
            except IsADirectoryError as e:
                raise InvalidKeyError("key names a directory of other keys", key=key) from e
            except OSError as e:
                raise _translate(e, key) from e

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        # File reads release the GIL: a batch goes through the worker threads so the
        # disk and the page cache work in parallel.
        return workers.map_items(self._get, keys, parallel=len(keys) >= 4)

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        workers.map_items(lambda kv: self._set(*kv), items, parallel=len(items) >= 4)

    def _erase(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            return
        except IsADirectoryError:
            return
        except OSError as e:
            raise _translate(e, key) from e
        self._prune(path.parent)

    def _prune(self, directory: Path) -> None:
        """Remove directories left empty, up to (not including) the root."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent

    def _erase_prefix(self, prefix: str) -> None:
        if not prefix:
            for child in list(self.root.iterdir()) if self.root.exists() else []:
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, onerror=_tolerate_vanished)
                else:
                    _unlink_quietly(child)
            return
        target = self.root / prefix[:-1]
        if target.is_dir():
            shutil.rmtree(target, onerror=_tolerate_vanished)
            self._prune(target.parent)

    def _exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def _getsize(self, key: str) -> int | None:
        try:
            return self._path(key).stat().st_size if self._path(key).is_file() else None
        except FileNotFoundError:
            return None

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
        for entry in entries:
            if TEMP_MARKER in entry.name:
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
        names = []
        for entry in entries:
            if TEMP_MARKER in entry.name:
                continue
            if entry.is_dir(follow_symlinks=False):
                names.append(entry.name + "/")
            elif entry.is_file():
                names.append(entry.name)
        names.sort()
        return iter(names)

    def __repr__(self) -> str:
        return f"FilesystemStore({str(self.root)!r})"


def _tolerate_vanished(function: object, path: str, exc_info: tuple) -> None:
    """rmtree error handler: a file a concurrent eraser removed first is fine; any other
    failure is reported, never swallowed."""
    error = exc_info[1]
    if isinstance(error, FileNotFoundError):
        return
    raise _translate(error, path) from error


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _translate(error: OSError, key: str) -> StoreError:
    """The one place filesystem errors become kvzarr errors."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError("no space left on device; the key keeps its old value", key=key)
    return StoreError(f"filesystem error: {error.strerror or error}", key=key)
