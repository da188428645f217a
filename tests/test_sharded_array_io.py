"""What a sharded array asks of its store: a small read fetches the index and the needed
inner chunks only; a small write keeps the other inner chunks' bytes as they were."""

import numpy as np

import kvzarr
from kvzarr.stores.byteranges import RangeRequest, SuffixRequest


class RecordingStore(kvzarr.MemoryStore):
    """A real MemoryStore that also records the reads it serves."""

    def __init__(self):
        super().__init__()
        self.whole_reads: list[str] = []
        self.range_reads: list[tuple[str, object]] = []
        self._serving_range = False

    def _get(self, key):
        if not self._serving_range:
            self.whole_reads.append(key)
        return super()._get(key)

    def _get_range(self, key, request):
        self.range_reads.append((key, request))
        self._serving_range = True  # MemoryStore cuts ranges out of _get's value
        try:
            return super()._get_range(key, request)
        finally:
            self._serving_range = False

    def reset(self):
        self.whole_reads.clear()
        self.range_reads.clear()


def make(store, **kwargs):
    a = kvzarr.create_array(store, name="img", shape=(256, 256), chunks=(32, 32),
                            shards=(128, 128), dtype="uint16",
                            compressors=[{"name": "gzip", "configuration": {"level": 1}}],
                            **kwargs)
    data = (np.arange(256 * 256) % 65521).astype("uint16").reshape(256, 256)
    a[...] = data
    return a, data


def test_small_read_fetches_index_and_one_inner_chunk():
    store = RecordingStore()
    a, data = make(store)
    store.reset()
    np.testing.assert_array_equal(a[40:50, 70:80], data[40:50, 70:80])
    assert store.whole_reads == []
    keys = {k for k, _ in store.range_reads}
    assert keys == {"img/c/0/0"}
    assert isinstance(store.range_reads[0][1], SuffixRequest)  # the index, at the end
    assert len(store.range_reads) == 2  # index + one inner chunk
    inner = store.range_reads[1][1]
    assert isinstance(inner, RangeRequest) and inner.end - inner.start < 4096


def test_neighbouring_inner_chunks_are_read_in_one_request():
    store = RecordingStore()
    a, data = make(store)
    store.reset()
    np.testing.assert_array_equal(a[0:64, 0:32], data[0:64, 0:32])  # two inner chunks
    assert len(store.range_reads) == 2  # index + one coalesced range


def inner_chunks(shard: bytes, n: int) -> list[bytes]:
    """Encoded inner chunks of a shard with its index at the end (bytes + crc32c)."""
    index = np.frombuffer(shard[-(16 * n + 4):-4], dtype="<u8").reshape(n, 2)
    return [shard[int(o):int(o) + int(m)] for o, m in index]


def test_small_write_keeps_untouched_inner_chunks_bytes():
    store = RecordingStore()
    a, data = make(store)
    before = inner_chunks(store.get("img/c/0/0"), 16)
    a[5, 40] = 1  # inner chunk (0, 1), flat id 1 in C order
    data[5, 40] = 1
    after = inner_chunks(store.get("img/c/0/0"), 16)
    np.testing.assert_array_equal(a[...], data)
    assert after[1] != before[1]
    assert [c for i, c in enumerate(after) if i != 1] == [c for i, c in enumerate(before)
                                                         if i != 1]
    assert store.get("img/c/1/1") is not None


def test_write_of_fill_values_empties_and_deletes_the_shard():
    store = RecordingStore()
    a = kvzarr.create_array(store, name="s", shape=(64,), chunks=(8,), shards=(32,),
                            dtype="int32")
    a[3] = 9
    assert store.exists("s/c/0")
    a[3] = 0
    assert not store.exists("s/c/0")
    a[40:50] = 5
    a[40:50] = 0
    assert [k for k in store.list() if "/c/" in k] == []
