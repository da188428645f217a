"""Many processes write one SQLite file at once: each its own rows of an array, and all
of them the same counter, with a read-modify-write in one transaction each.

Run:  python examples/many_writers.py [STORE]   (default: a new file writers.sqlite)
Every row and every increment is there at the end: no lost update.
"""

import multiprocessing
import sys

import numpy as np

import kvzarr

WORKERS = 4
ROWS_EACH = 8
INCREMENTS_EACH = 5


def work(target: str, worker: int) -> None:
    """One writer process: opens the store itself, writes its rows, counts."""
    with kvzarr.open_store(target) as store:
        root = kvzarr.open_group(store, mode="r+")
        table, counter = root["table"], root["counter"]
        rows = slice(worker * ROWS_EACH, (worker + 1) * ROWS_EACH)
        # rows of different writers share chunks: each write is a read-modify-write of
        # the chunks it touches, in one transaction, so no writer undoes another's rows
        table[rows, :] = worker + 1
        for _ in range(INCREMENTS_EACH):
            with store.transaction():            # the read and the write are one step
                counter[0] = counter[0] + 1


def main() -> None:
    target = sys.argv[1] if len(sys.argv) > 1 else "writers.sqlite"
    root = kvzarr.open_group(target, mode="w")
    root.create_array("table", shape=(WORKERS * ROWS_EACH, 16), chunks=(5, 16),
                      dtype="int32", fill_value=0)
    root.create_array("counter", shape=(1,), dtype="int64", fill_value=0)

    spawn = multiprocessing.get_context("spawn")
    processes = [spawn.Process(target=work, args=(target, w)) for w in range(WORKERS)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
        assert p.exitcode == 0, f"a writer failed with exit code {p.exitcode}"

    root = kvzarr.open_group(target, mode="r")
    expected = np.repeat(np.arange(1, WORKERS + 1), ROWS_EACH)[:, None] * np.ones(16, int)
    assert (root["table"][...] == expected).all(), "a row was lost"
    total = int(root["counter"][0])
    assert total == WORKERS * INCREMENTS_EACH, f"lost updates: {total}"
    print(f"{WORKERS} processes wrote {WORKERS * ROWS_EACH} rows and counted to {total}")


if __name__ == "__main__":
    main()
