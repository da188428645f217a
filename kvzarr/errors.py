"""Every exception kvzarr raises on purpose.

Each class carries the key, path or field it is about, and subclasses the builtin that
zarr-python's equivalent subclasses, so code written against zarr-python keeps catching
what it expects (``except IndexError`` still catches a :class:`BoundsCheckError`).
Backend exceptions are translated into these with ``raise ... from``.
"""

from __future__ import annotations

from typing import Any


class KvzarrError(Exception):
    """Root of every kvzarr error. The message names the key, path and field involved;
    code that learns one of them later (a codec error re-raised with its chunk key) sets
    the attribute and the message follows."""

    def __init__(self, message: str, *, key: str | None = None, path: str | None = None,
                 field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key
        self.path = path
        self.field = field
        self.hint = hint

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(f"path {_shown(self.path)}")
        if self.key is not None:
            where.append(f"key {_shown(self.key)}")
        if self.field is not None:
            where.append(f"field {_shown(self.field)}")
        text = self.message
        if where:
            text += f" ({', '.join(where)})"
        if self.hint:
            text += f". Hint: {self.hint}"
        return text


#: the longest key, path or field a message quotes in full (the attribute keeps it all)
_SHOWN_MAX = 200


def _shown(text: Any) -> str:
    """``text`` quoted for a message; a very long one (a key refused for its length) by
    its start and end only, so one error does not print kilobytes."""
    if not isinstance(text, str) or len(text) <= _SHOWN_MAX:
        return repr(text)
    head, tail = text[:120], text[-40:]
    return f"{head!r} ... {tail!r} ({len(text):,} characters)"


# --- metadata -------------------------------------------------------------------------

class MetadataError(KvzarrError, ValueError):
    """A metadata document is malformed: broken JSON, a missing or mistyped field."""


class UnsupportedExtensionError(MetadataError):
    """Metadata names an extension (codec, data type, grid, ...) kvzarr does not implement
    and does not allow to be ignored (``must_understand`` is true or absent)."""


# --- hierarchy ------------------------------------------------------------------------

class NodeNotFoundError(KvzarrError, KeyError, FileNotFoundError):
    """No array or group at a path. A KeyError for ``group[name]``, a FileNotFoundError
    for ``open_array``/``open_group``, as zarr-python raises."""


class NodeExistsError(KvzarrError, FileExistsError):
    """Creating a node where one already exists without ``overwrite=True``."""


class NodeTypeError(KvzarrError, TypeError):
    """An array was found where a group was expected, or the reverse."""


class IncompatibleNodeError(NodeTypeError):
    """``require_array`` found an array at the path, but not of the shape or data type
    asked for (a TypeError, as zarr-python raises)."""


# --- indexing -------------------------------------------------------------------------

class RectilinearChunksError(KvzarrError, NotImplementedError, AttributeError):
    """An array on a rectilinear chunk grid was asked for its one chunk or shard shape,
    which it does not have; its ``chunk_sizes`` (``write_chunk_sizes`` for the stored
    chunks) give the sizes along each dimension. Subclasses NotImplementedError, what
    zarr-python raises there, and AttributeError, so that ``getattr(a, "chunks", None)``
    (as dask's ``from_array`` asks) answers None rather than failing."""


class ArrayIndexError(KvzarrError, IndexError):
    """A selection is not valid for this array."""


class BoundsCheckError(ArrayIndexError):
    """An index lies outside the array (zarr-python: BoundsCheckError)."""


class NegativeStepError(ArrayIndexError):
    """A slice with a negative step; only steps >= 1 are supported."""


class VindexInvalidSelectionError(ArrayIndexError):
    """A coordinate/mask selection with items vindex cannot take (slices, 1-D masks on N-D)."""


class InvalidSelectionError(KvzarrError, ValueError):
    """A selection that is wrong in value rather than in bounds, e.g. slice step 0."""


class ShapeMismatchError(ArrayIndexError, ValueError):
    """A value assigned to a selection does not have the selection's shape.
    Both an IndexError and a ValueError, as zarr-python raises either depending on the case."""


class ValueConversionError(KvzarrError, ValueError):
    """A value that cannot become what the array or store holds: text written into an
    integer array, NaN into integers. Its subclasses are also the builtin error numpy
    raises for the case, so ``except TypeError`` / ``except OverflowError`` still work."""


class ValueTypeError(ValueConversionError, TypeError):
    """A value of a type that cannot be converted: a str given as a store value, an
    object written into a numeric array, something that is not a byte request."""


class ValueOverflowError(ValueConversionError, OverflowError):
    """A number out of the range of the array's data type (2**40 into int32)."""


# --- codecs and chunks ----------------------------------------------------------------

class CodecError(KvzarrError, ValueError):
    """A chunk could not be encoded or decoded: truncated data, wrong size, bad framing."""


class DecodedSizeError(CodecError):
    """A chunk decodes to more bytes than its codec spec allows: a decompression bomb or
    corrupt data. Decoders stop at ``limit`` bytes (what the chunk's shape and data type
    allow, plus what the format needs) instead of inflating the whole value first;
    ``limit`` is that bound and ``declared`` the size the value's own header claims
    (None where the format has no such header)."""

    def __init__(self, message: str, *, limit: int | None = None,
                 declared: int | None = None, **where: Any) -> None:
        super().__init__(message, **where)
        self.limit = limit
        self.declared = declared


class ChecksumMismatchError(CodecError):
    """A stored checksum does not match the bytes it protects. Where the checksum covers a
    value block by block (the checksum storage transformer), ``block`` is the index of the
    first bad block and ``stored`` / ``computed`` are the two CRC-32C values (None where
    they do not apply, e.g. a value of the wrong length)."""

    def __init__(self, message: str, *, block: int | None = None, stored: int | None = None,
                 computed: int | None = None, **where: Any) -> None:
        super().__init__(message, **where)
        self.block = block
        self.stored = stored
        self.computed = computed


class ChecksumRecordError(ChecksumMismatchError):
    """A checksum record is itself damaged (its own CRC-32C fails, or its layout is not
    one this kvzarr reads), so the value it protects cannot be verified. ``key`` names the
    value, not the record."""


class ChecksumMissingError(ChecksumMismatchError):
    """A value has no checksum record (it was written by something other than the
    checksum transformer) and the transformer was told to refuse such values
    (``missing="fail"``)."""


class ChunkNotFoundError(KvzarrError, KeyError):
    """A chunk is missing and the array was opened with ``read_missing_chunks=False``."""


# --- vector geometry (Zarr Vector Format) -----------------------------------------------

class VectorDataError(KvzarrError, ValueError):
    """Geometry that :mod:`kvzarr.vectors` cannot store or answer for as given: positions
    of the wrong dimensionality or with NaN, a bounding box of the wrong length, bins that
    do not divide chunks, faces or edges that index missing vertices, object ids unknown to
    the write. Raised before anything is written."""


# --- stores ---------------------------------------------------------------------------

class StoreError(KvzarrError, OSError):
    """A store operation failed in the backend."""


class InvalidKeyError(KvzarrError, ValueError):
    """A key that no store accepts: empty segments, '..', NUL, absolute or too long."""


class InvalidByteRangeError(KvzarrError, ValueError):
    """A byte range or offset that cannot exist: negative, or an end before its start."""


class ReadOnlyError(KvzarrError, PermissionError):
    """A write to a store (or array) opened read-only."""


class UnsupportedOperationError(KvzarrError, NotImplementedError):
    """The store lacks the capability an operation needs (see ``Store.capabilities``)."""


class StoreConfigError(StoreError, ValueError):
    """A store was opened with options that cannot work (unknown durability, a reserved
    table name, options that disagree with another handle on the same file)."""


class ConflictError(StoreError):
    """A write transaction could not get its lock or was aborted by a concurrent writer
    after the configured retries."""


class AppendConflictError(ConflictError):
    """A compare-and-append found the value absent or not of the size the appender read
    (another writer changed it in between); nothing was written. Re-read and retry."""


class StoreFullError(StoreError):
    """The store ran out of space (disk or database map); nothing of the failed write
    was kept."""


class StorePermissionError(StoreError, PermissionError):
    """The operating system refused access to the store's files (their permissions, a
    read-only filesystem); nothing of the refused operation was written."""


class CopyVerificationError(StoreError):
    """Values copied between stores (:func:`kvzarr.copy_store`) read back from the
    destination different from what was read from the source; ``keys`` lists them all."""

    def __init__(self, message: str, *, keys: list[str] | None = None, **where: Any) -> None:
        super().__init__(message, **where)
        self.keys = list(keys or [])


class StoreClosedError(StoreError, ValueError):
    """An operation on a store (or a node on it) after the store was closed. A
    ValueError as well, as Python's own files raise on I/O after ``close()``."""


class NotPicklableError(KvzarrError, TypeError):
    """An object that cannot be sent to another process: a MemoryStore (and the arrays,
    groups and transformer stacks on one), whose data lives only in this process's
    memory. A TypeError, as ``pickle`` raises for objects it cannot pickle."""


class SchemaVersionError(StoreError):
    """A database was written with a different schema version than this kvzarr uses."""


# --- warnings -------------------------------------------------------------------------

class KvzarrWarning(UserWarning):
    """Root of every warning kvzarr issues."""


class UnprotectedValueWarning(KvzarrWarning):
    """A value without a checksum record was read through a checksum transformer opened
    with ``missing="warn"``: it was returned unverified."""


class InvalidConsolidatedMetadataWarning(KvzarrWarning):
    """A group's consolidated metadata is not valid (see :mod:`kvzarr.consolidated`):
    the listing was read from the store instead."""


class InvalidStoredKeyWarning(KvzarrWarning):
    """A store holds a key that is not a valid key (written by another program:
    ``"/x/zarr.json"``, ``"a//zarr.json"``, a name that is not UTF-8). Listings leave it
    out, so no node is made of it; kvzarr can neither read nor write it."""
