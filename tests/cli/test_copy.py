"""Copying between stores: :func:`kvzarr.copy_store` and ``kvzarr cp``, on real stores
of every backend (PostgreSQL when ``KVZARR_TEST_POSTGRES_URL`` names a server)."""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.cli import ERROR, FOUND_PROBLEMS, OK, main
from kvzarr.errors import (CopyVerificationError, NodeExistsError, NodeNotFoundError,
                           NodeTypeError, StoreConfigError, StoreError)
from kvzarr.metadata.v3 import GroupMetadata
from kvzarr.stores.memory import MemoryStore
from kvzarr.transformers import Transformer, build_stack
from tests.stores.conftest import BACKENDS

NAMES = sorted(BACKENDS)
#: every backend is a source and a destination at least twice: each to the next and to
#: the one before, in name order
PAIRS = sorted({(a, NAMES[(i + step) % len(NAMES)]) for i, a in enumerate(NAMES)
                for step in (1, -1)})


def populate(store) -> dict[str, np.ndarray]:
    """A small hierarchy in ``store``; returns the arrays' contents by path."""
    root = kvzarr.open_group(store, mode="w", attributes={"title": "copy me"})
    want = {
        "g/plain": np.arange(40, dtype="int16").reshape(10, 4),
        "g/tiles": np.full((64, 64), np.nan, dtype="float32"),
        "labels": np.array(["ocean", "land", "ice"], dtype=object),
    }
    want["g/tiles"][:32, :40] = np.arange(32 * 40, dtype="float32").reshape(32, 40)
    root.create_array("g/plain", shape=(10, 4), chunks=(3, 4), dtype="int16",
                      attributes={"units": "m"})[...] = want["g/plain"]
    root.create_array("g/tiles", shape=(64, 64), chunks=(8, 8), shards=(32, 32),
                      dtype="float32", fill_value=float("nan"))[:32, :40] = \
        want["g/tiles"][:32, :40]
    root.create_array("labels", shape=(3,), dtype=str)[...] = want["labels"]
    root.create_group("empty", attributes={"note": "no members"})
    return want


def snapshot(store) -> dict[str, bytes]:
    return {k: bytes(store.get(k)) for k in store.list()}


def check_arrays(store, want: dict[str, np.ndarray], prefix: str = "") -> None:
    for path, values in want.items():
        if path.startswith(prefix):
            got = kvzarr.open_array(store, path=path, mode="r")[...]
            np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-to-{p[1]}")
def test_copy_between_backends_is_byte_for_byte_and_verified(tmp_path, pair):
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    src_f, dst_f = BACKENDS[pair[0]](tmp_path / "src"), BACKENDS[pair[1]](tmp_path / "dst")
    try:
        src, dst = src_f.make(), dst_f.make()
        want = populate(src)
        before = snapshot(src)
        report = kvzarr.copy_store(src, dst, batch_keys=7)
        assert snapshot(dst) == before == snapshot(src)   # same keys, same bytes
        assert report.values == len(before) == report.verified
        assert report.bytes == sum(map(len, before.values()))
        assert report.nodes == 6                   # root, g, g/plain, g/tiles, labels, empty
        assert report.transactions == math.ceil(len(before) / 7)
        check_arrays(dst, want)
        assert kvzarr.open_group(dst, mode="r").attrs["title"] == "copy me"
    finally:
        src_f.close_all()
        dst_f.close_all()


def test_copy_of_a_path_brings_its_ancestors_and_nothing_else(tmp_path):
    src = str(tmp_path / "src.lmdb")
    with kvzarr.open_store(src) as store:
        want = populate(store)
    dst = str(tmp_path / "dst.sqlite")
    report = kvzarr.copy_store(src, dst, path="g/tiles")
    with kvzarr.open_store(dst, mode="r") as store:
        keys = list(store.list())
        assert all(k.startswith("g/tiles/") for k in keys if k.count("/") > 1)
        assert "g/zarr.json" in keys and "zarr.json" in keys       # the ancestors
        assert not any(k.startswith(("g/plain", "labels", "empty")) for k in keys)
        check_arrays(store, want, prefix="g/tiles")
        root = kvzarr.open_group(store, mode="r")
        assert root.attrs["title"] == "copy me"                    # the source's root
        assert list(root["g"].keys()) == ["tiles"]
    assert report.nodes == 3 and report.verified == report.values == len(keys)
    # a second node beside it: the ancestors are there already and stay as they are
    report = kvzarr.copy_store(src, dst, path="/labels/")
    assert report.nodes == 1
    with kvzarr.open_store(dst, mode="r") as store:
        check_arrays(store, want, prefix="labels")


def test_copy_writes_chunks_before_the_metadata_that_shows_them(tmp_path):
    src = MemoryStore()
    populate(src)
    report = kvzarr.copy_store(src, MemoryStore())
    order = report.keys
    docs = [i for i, k in enumerate(order) if k.endswith("zarr.json")]
    assert docs == list(range(len(order) - len(docs), len(order)))   # all at the end
    depth = [order[i].count("/") for i in docs]
    assert depth == sorted(depth, reverse=True) and order[-1] == "zarr.json"


def test_copy_refuses_existing_nodes_and_writes_nothing(tmp_path):
    src = MemoryStore()
    populate(src)
    dst = str(tmp_path / "dst.zip")
    kvzarr.copy_store(src, dst, path="g/plain")
    with kvzarr.open_store(dst, mode="r") as store:
        before = snapshot(store)
    for path in (None, "g/plain", "g"):
        with pytest.raises(NodeExistsError, match="already holds"):
            kvzarr.copy_store(src, dst, path=path)
    with kvzarr.open_store(dst, mode="r") as store:
        assert snapshot(store) == before


def test_copy_with_overwrite_replaces_the_node(tmp_path):
    src, dst = MemoryStore(), MemoryStore()
    want = populate(src)
    kvzarr.create_array(dst, name="g/plain", shape=(100,), chunks=(1,), dtype="u1")[:] = 3
    kvzarr.create_array(dst, name="keep", shape=(2,), dtype="u1")[:] = 9
    report = kvzarr.copy_store(src, dst, path="g/plain", overwrite=True)
    assert report.erased == 101                       # 100 chunks and the document
    check_arrays(dst, want, prefix="g/plain")
    np.testing.assert_array_equal(kvzarr.open_array(dst, path="keep")[:], [9, 9])
    assert {k for k in dst.list() if k.startswith("g/plain/")} == \
        {k for k in src.list() if k.startswith("g/plain/")}


def test_copy_under_an_array_is_refused_before_writing(tmp_path):
    src, dst = MemoryStore(), MemoryStore()
    populate(src)
    kvzarr.create_array(dst, name="g", shape=(2,), dtype="u1")
    before = snapshot(dst)
    with pytest.raises(NodeTypeError, match="ancestor"):
        kvzarr.copy_store(src, dst, path="g/plain")
    assert snapshot(dst) == before


def test_copy_errors_for_bad_requests(tmp_path):
    src = MemoryStore()
    populate(src)
    with pytest.raises(NodeNotFoundError):
        kvzarr.copy_store(src, MemoryStore(), path="nope")
    with pytest.raises(NodeNotFoundError, match="nothing to copy"):
        kvzarr.copy_store(MemoryStore(), MemoryStore())
    with pytest.raises(StoreError, match="no store at this path"):
        kvzarr.copy_store(str(tmp_path / "missing.sqlite"), str(tmp_path / "d.sqlite"))
    assert list(tmp_path.iterdir()) == []                  # neither was created
    with pytest.raises(StoreConfigError, match="same store"):
        kvzarr.copy_store(src, src)
    target = str(tmp_path / "x.sqlite")
    kvzarr.copy_store(src, target)
    with pytest.raises(StoreConfigError, match="same store"):
        kvzarr.copy_store(target, os.path.join(str(tmp_path), ".", "x.sqlite"))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(StoreConfigError):
            kvzarr.copy_store(src, MemoryStore(), batch_keys=bad)
        with pytest.raises(StoreConfigError):
            kvzarr.copy_store(src, MemoryStore(), batch_bytes=bad)


def test_copy_never_decodes_so_unknown_codecs_are_copied(tmp_path):
    """Chunks are bytes to the copy: an array whose codec kvzarr does not know (written
    by another tool) is copied intact."""
    src = MemoryStore()
    src.set("zarr.json", b'{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    src.set("a/zarr.json", b'{"zarr_format": 3, "node_type": "array", "shape": [4], '
            b'"data_type": "uint8", "chunk_grid": {"name": "regular", "configuration": '
            b'{"chunk_shape": [2]}}, "chunk_key_encoding": {"name": "default"}, '
            b'"fill_value": 0, "codecs": [{"name": "bytes"}, {"name": "some-future-codec"}]}')
    src.set("a/c/0", b"\x00opaque bytes\xff")
    dst = MemoryStore()
    kvzarr.copy_store(src, dst)
    assert snapshot(dst) == snapshot(src)


class Batches(Transformer):
    """Counts the write transactions that reach the store; fails the ``fail_at``-th."""
    name = "batches"

    def __init__(self, base=None, *, fail_at=None):
        self.commits = 0
        self.fail_at = fail_at
        super().__init__(base)

    def set_many(self, items):
        items = list(items)
        if self.fail_at is not None and self.commits + 1 == self.fail_at:
            raise StoreError("disk full (injected)")
        super().set_many(items)
        self.commits += 1


def test_one_write_transaction_per_batch(tmp_path):
    src = MemoryStore()
    populate(src)
    n = sum(1 for _ in src.list())
    for batch_keys, batch_bytes in ((1, 1 << 30), (5, 1 << 30), (10_000, 1 << 30),
                                    (10_000, 1)):
        layer = Batches()
        dst = build_stack(kvzarr.open_store(str(tmp_path / f"d{batch_keys}-{batch_bytes}"
                                                         ".sqlite")), [layer])
        report = kvzarr.copy_store(src, dst, batch_keys=batch_keys, batch_bytes=batch_bytes)
        expected = n if batch_bytes == 1 else math.ceil(n / batch_keys)
        assert layer.commits == report.transactions == expected
        dst.close()


def test_an_interrupted_copy_shows_no_node_and_overwrite_finishes_it(tmp_path):
    src = MemoryStore()
    want = populate(src)
    target = str(tmp_path / "dst.lmdb")
    dst = build_stack(kvzarr.open_store(target), [Batches(fail_at=3)])
    with pytest.raises(StoreError, match="injected"):
        kvzarr.copy_store(src, dst, batch_keys=3)   # 7 chunks, then 6 documents
    dst.close()
    with kvzarr.open_store(target, mode="r") as store:
        left = list(store.list())
        assert len(left) == 6                     # two batches of chunks landed ...
        assert not any(k.endswith("zarr.json") for k in left)   # ... and no node
    with pytest.raises(NodeExistsError):
        kvzarr.copy_store(src, target)
    kvzarr.copy_store(src, target, overwrite=True)
    with kvzarr.open_store(target, mode="r") as store:
        assert snapshot(store) == snapshot(src)
        check_arrays(store, want)


class FailingRead(Transformer):
    """A source whose ``get_many`` fails once it has given ``after`` values."""
    name = "failing-read"

    def __init__(self, base=None, *, after=1):
        self.after, self.given = after, 0
        super().__init__(base)

    def get_many(self, keys):
        if self.given >= self.after:
            raise StoreError("source unreadable (injected)")
        values = super().get_many(keys)
        self.given += sum(v is not None for v in values)
        return values


def test_a_copy_into_a_zip_path_is_one_transaction(tmp_path):
    """A zip destination named by its path takes the whole copy in one transaction: one
    central directory (end record) appended for the whole copy, not one per batch, and
    a copy that fails half way leaves the archive byte for byte as it was."""
    src = MemoryStore()
    want = populate(src)
    target = tmp_path / "dst.zip"
    with kvzarr.ZipStore(target) as zs:
        kvzarr.create_array(zs, name="before", shape=(4,), dtype="int8")[...] = 1
    before = target.read_bytes()
    failing = FailingRead(after=1)             # the first read is one value
    with pytest.raises(StoreError, match="injected"):
        kvzarr.copy_store(build_stack(src, [failing]), str(target), path="g", batch_keys=1)
    assert failing.given == 1                  # a batch of it was set
    assert target.read_bytes() == before
    report = kvzarr.copy_store(src, str(target), path="g", batch_keys=2)
    assert report.transactions >= 4
    after = target.read_bytes()
    assert after[:len(before)] == before                  # appended to, in place
    assert after.count(b"PK\x05\x06") == before.count(b"PK\x05\x06") + 1
    with kvzarr.open_store(str(target), mode="r") as store:
        check_arrays(store, want, prefix="g/")
        assert kvzarr.open_array(store, path="before", mode="r")[...].tolist() == [1] * 4


class Flipping(Transformer):
    """Returns ``key``'s value with its last byte flipped: a store that lies on reads."""
    name = "flipping"

    def __init__(self, base=None, *, key=""):
        self.key = key
        super().__init__(base)

    def iter_values(self, keys):
        for i, value in super().iter_values(keys):
            if keys[i] == self.key and value is not None:
                value = bytes(value[:-1]) + bytes([value[-1] ^ 1])
            yield i, value


def test_verification_catches_a_destination_that_returns_other_bytes():
    src = MemoryStore()
    populate(src)
    dst = build_stack(MemoryStore(), [Flipping(key="g/plain/c/1/0")])
    with pytest.raises(CopyVerificationError) as e:
        kvzarr.copy_store(src, dst)
    assert e.value.keys == ["g/plain/c/1/0"] and e.value.key == "g/plain/c/1/0"


def test_checksum_records_travel_with_the_values(tmp_path, capsys):
    src = str(tmp_path / "src.sqlite")
    store = kvzarr.open_store(src, transformers=["checksum"])
    want = populate(store)
    store.close()
    dst = str(tmp_path / "dst.lmdb")
    report = kvzarr.copy_store(src, dst, path="g")
    assert report.reserved > 0
    with kvzarr.open_store(dst, mode="r") as plain:
        records = [k for k in plain.list() if k.startswith("__kvzarr/")]
        # the records of the values under g/ and of the ancestors' documents copied
        assert records and all(k.startswith("__kvzarr/crc/g/") or k in (
            "__kvzarr/crc/zarr.json", "__kvzarr/crc/g/zarr.json") for k in records)
        assert "__kvzarr/crc/zarr.json" in records
    assert main(["verify", dst]) == OK                     # the records hold for the copy
    assert "UNPROTECTED" not in capsys.readouterr().out
    with kvzarr.open_store(dst, mode="r", transformers=["checksum"]) as checked:
        check_arrays(checked, want, prefix="g/")
    # without the records: the copy's values are unprotected
    bare = str(tmp_path / "bare.lmdb")
    report = kvzarr.copy_store(src, bare, reserved=False)
    assert report.reserved == 0
    assert main(["verify", bare]) == OK
    assert "UNPROTECTED" in capsys.readouterr().out


def test_overwrite_erases_the_records_of_what_it_replaces(tmp_path):
    src = MemoryStore()
    populate(src)
    target = str(tmp_path / "dst.sqlite")
    with kvzarr.open_store(target, transformers=["checksum"]) as store:
        kvzarr.create_array(store, name="g/plain", shape=(100,), chunks=(1,), dtype="u1")[:] = 3
    kvzarr.copy_store(src, target, path="g/plain", overwrite=True)
    with kvzarr.open_store(target, mode="r") as store:
        assert not [k for k in store.list() if k.startswith("__kvzarr/crc/g/plain/")]


keys_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "a/b", "ab", "a/c", "b/a/z"]),
              st.sampled_from(["zarr.json", "c/0", "c/1", "x"])).map(lambda t: "/".join(t)),
    unique=True, max_size=20)


@settings(max_examples=60, deadline=None)
@given(keys=keys_strategy, data=st.data())
def test_copy_of_a_path_equals_the_model(keys, data):
    """Whatever the keys and batch sizes: the destination gets exactly the source's keys
    under the path, with the same values, plus the missing ancestors' documents."""
    values = {k: data.draw(st.binary(max_size=40), label=k) for k in keys}
    src = MemoryStore()
    if values:
        src.set_many(values.items())
    path = data.draw(st.sampled_from(["", "a", "a/b", "b"]), label="path")
    dst = MemoryStore()
    batch_keys = data.draw(st.integers(1, 6), label="batch_keys")
    batch_bytes = data.draw(st.integers(1, 100), label="batch_bytes")
    below = {k: v for k, v in values.items() if not path or k.startswith(path + "/")}
    if (path and f"{path}/zarr.json" not in values) or (not path and not values):
        with pytest.raises(NodeNotFoundError):
            kvzarr.copy_store(src, dst, path=path, batch_keys=batch_keys,
                              batch_bytes=batch_bytes)
        assert snapshot(dst) == {}
        return
    report = kvzarr.copy_store(src, dst, path=path, batch_keys=batch_keys,
                               batch_bytes=batch_bytes)
    got = snapshot(dst)
    ancestors = [path.rpartition("/")[0]] if "/" in path else []
    ancestors += [""] if path else []
    model = dict(below)
    for a in ancestors:   # (the source holds no group documents: empty groups are made)
        model[f"{a}/zarr.json" if a else "zarr.json"] = GroupMetadata().to_bytes()
    assert got == model
    assert report.values == report.verified == len(got)


# -- the command --------------------------------------------------------------------------


def test_cp_command_copies_verifies_and_summarises(tmp_path, capsys):
    src = str(tmp_path / "src.sqlite")
    with kvzarr.open_store(src) as store:
        want = populate(store)
        n = sum(1 for _ in store.list())
    dst = str(tmp_path / "dst.zip")
    assert main(["cp", src, dst]) == OK
    out = capsys.readouterr().out
    assert f"copied from {src} to {dst}: 6 nodes, {n} values" in out
    assert f"verified {n} values" in out
    with kvzarr.open_store(dst, mode="r") as store:
        check_arrays(store, want)
    assert main(["cp", src, dst, "--path", "g"]) == ERROR
    assert "already holds" in capsys.readouterr().err
    assert main(["cp", src, dst, "--path", "g", "--overwrite"]) == OK
    assert "copied /g from" in capsys.readouterr().out
    assert main(["cp", str(tmp_path / "nope.lmdb"), str(tmp_path / "x.lmdb")]) == ERROR
    assert "no store at this path" in capsys.readouterr().err
    assert not (tmp_path / "x.lmdb").exists() and not (tmp_path / "nope.lmdb").exists()
    assert main(["cp", src, src]) == ERROR
    assert "same store" in capsys.readouterr().err


def test_cp_command_into_a_directory_and_back_to_lmdb(tmp_path):
    src = str(tmp_path / "src.lmdb")
    with kvzarr.open_store(src) as store:
        want = populate(store)
        before = snapshot(store)
    assert main(["cp", src, str(tmp_path / "dir"), "--path", "g"]) == OK
    assert main(["cp", str(tmp_path / "dir"), str(tmp_path / "back.lmdb")]) == OK
    with kvzarr.open_store(str(tmp_path / "back.lmdb"), mode="r") as store:
        got = snapshot(store)
        check_arrays(store, want, prefix="g/")
    assert {k: v for k, v in before.items() if k.startswith("g/")} == \
        {k: v for k, v in got.items() if k.startswith("g/")}


def test_cp_command_exit_1_when_the_copy_reads_back_different(tmp_path, capsys,
                                                              monkeypatch):
    """The command's answer to a failed read-back: the destination is wrapped in a layer
    that flips a byte of one value on reads."""
    real = kvzarr.copy_store

    def into_a_lying_store(source, dest, **options):
        with kvzarr.open_store(dest) as store:
            return real(source, build_stack(store, [Flipping(key="g/plain/c/1/0")]),
                        **options)

    monkeypatch.setattr(kvzarr, "copy_store", into_a_lying_store)
    src = str(tmp_path / "src.sqlite")
    with kvzarr.open_store(src) as store:
        populate(store)
    assert main(["cp", src, str(tmp_path / "dst.sqlite")]) == FOUND_PROBLEMS
    err = capsys.readouterr().err
    assert "1 of " in err and "read back different" in err
    assert "differs after copying: g/plain/c/1/0" in err


@pytest.mark.skipif(not os.environ.get("KVZARR_TEST_POSTGRES_URL"),
                    reason="needs KVZARR_TEST_POSTGRES_URL")
def test_cp_command_to_and_from_postgresql(tmp_path, capsys):
    """Through URLs, as a user types them: a fresh database of the test server, since a
    URL names the default table."""
    import uuid

    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    import importlib.util

    server = make_url(os.environ["KVZARR_TEST_POSTGRES_URL"])
    name = f"kvzarr_cp_{uuid.uuid4().hex[:10]}"
    driver = "psycopg" if importlib.util.find_spec("psycopg") else "psycopg2"
    admin = sa.create_engine(server.set(drivername=f"postgresql+{driver}"),
                             isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = server.set(database=name).render_as_string(hide_password=False)
    try:
        src = str(tmp_path / "src.sqlite")
        with kvzarr.open_store(src) as store:
            want = populate(store)
        assert main(["cp", src, url]) == OK
        assert main(["cp", url, str(tmp_path / "back.lmdb"), "--path", "g"]) == OK
        with kvzarr.open_store(str(tmp_path / "back.lmdb"), mode="r") as store:
            check_arrays(store, want, prefix="g/")
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_cp_command_shows_progress_bars_on_a_terminal(tmp_path):
    pty = pytest.importorskip("pty")
    src = str(tmp_path / "src.sqlite")
    with kvzarr.open_store(src) as store:
        populate(store)
    dst = str(tmp_path / "dst.lmdb")
    import fcntl
    import struct
    import termios
    pid, fd = pty.fork()
    if pid == 0:   # the child, on the terminal: 100 columns before anything asks
        try:
            fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
            os.execv(sys.executable, [sys.executable, "-c", "import sys; from kvzarr.cli "
                                      f"import main; sys.exit(main(['cp', {src!r}, "
                                      f"{dst!r}]))"])
        finally:
            os._exit(127)   # never back into pytest
    output = bytearray()
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output.extend(chunk)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    text = output.decode(errors="replace")
    assert "copy: 100%" in text and "verify: 100%" in text and "verified" in text


def test_a_copy_of_nothing_creates_no_destination_file(tmp_path):
    src = str(tmp_path / "src.sqlite")
    with kvzarr.open_store(src) as store:
        populate(store)
    for dst in ("new.lmdb", "new.sqlite", "new.zip", "new"):
        assert main(["cp", src, str(tmp_path / dst), "--path", "nope"]) == ERROR
        assert not (tmp_path / dst).exists()
