"""The checksum storage transformer (``"checksum"``, :class:`Checksum`): a CRC-32C for every
block of every value, kept out of band, written with the value and verified on every read.

Promises
--------
* **Values are untouched.** What the layer above writes is stored byte for byte, so other
  Zarr readers (zarr-python, TensorStore) read a store written through the stack as if
  the stack were not there (``tests/interop/test_checksum_interop.py``). Each value's *record*
  lives at ``__kvzarr/crc/<key>``, under the reserved prefix of
  :mod:`kvzarr.stores.keys`. Listings through the stack never show records (the root
  shows ``__kvzarr/`` only when other reserved keys are there), keys and prefixes under
  ``__kvzarr/crc/`` are refused from above (:class:`~kvzarr.errors.InvalidKeyError`),
  and the stack's ``max_key_bytes`` is the store's less the prefix, so a key too long for
  its record is refused before anything is written.
* **Every read verifies what it returns.** ``get``, ``get_many``, ``get_many_views`` and
  ``iter_values`` check whole values (one pass of the whole-value checksum);
  ``get_partial_values`` widens every request to the whole blocks it touches (the record
  gives the value's length, so offsets and suffixes become absolute ranges), merges
  overlapping blocks of a key, reads every range in ONE ``get_partial_values`` of the
  store (a SQL store serves all the ranges of a key in one statement), checks those
  blocks and cuts the requested bytes out. A range that ends in the value's last block
  asks for one byte more, so a value longer than its record is caught too. A failure
  raises :class:`~kvzarr.errors.ChecksumMismatchError` naming the key, the first bad
  block (its byte range) and both checksums, and the read returns nothing; a damaged
  record raises :class:`~kvzarr.errors.ChecksumRecordError` naming the value's key. A
  read that touches only good blocks of a damaged value succeeds.
* **No false positives.** A value written through the stack always verifies: after a
  crash at any moment, and while other threads and processes write (see "Stores without
  transactions").
* **Values without a record** (written by another tool) follow ``missing=``: ``"fail"``
  (the default) raises :class:`~kvzarr.errors.ChecksumMissingError`, ``"warn"`` returns
  the value with an :class:`~kvzarr.errors.UnprotectedValueWarning`, ``"trust"`` returns
  it. "fail" is the default because a user who stacks checksums asked for every read to
  be verified: a value nobody can vouch for is adopted explicitly (``kvzarr verify
  TARGET --repair-missing``) or read knowingly, never passed on as if verified.
* **The scrub.** :meth:`Checksum.verify` and ``kvzarr verify TARGET [PATH]`` read every
  value under a prefix and report mismatches, damaged records, records without values
  (bad), and unprotected values and interrupted writes (not bad); ``repair_missing``
  gives unprotected values records and completes interrupted writes (:mod:`.scrub`).
* :meth:`Checksum.stats` counts what was verified, what failed, unprotected reads and
  records written.

Records
-------
Binary, little-endian and self-checking (:mod:`.record`): a magic and format version,
the block size, the value's length, its whole-value CRC-32C, one CRC-32C per block, and
a CRC-32C of the record itself, so a damaged record is told apart from a damaged value.
A record keeps the block size it was written with; readers take it from the record.

Writes
------
* On a store with transactions (LMDB, SQL, zip, memory) a value and its record are
  written in ONE transaction of the store (one ``set_many``; erasures in one
  ``erase_values`` or one transaction around both ``erase_prefix`` calls): a crash or a
  failed write leaves both old or both new, and a failed write changes nothing.
* A partial write gives new checksums to the blocks it touches only. A block it covers
  in part is read and verified first: its new checksum must not vouch for damaged bytes
  (the write fails with ChecksumMismatchError and changes nothing). The whole-value
  checksum is then rebuilt from the block checksums by CRC combination (zlib's
  ``crc32_combine`` method, :func:`.record.whole_from_blocks`), not by reading the
  value.
* An append (where the store appends natively; ``capabilities.appends`` is the
  store's) continues the checksum of the old last block and the whole-value checksum over
  the new bytes, since CRC-32C continues from a stored value. No old byte is read: a
  damaged old block stays detectable, because the new record extends the checksum that
  was stored, not one computed from the damaged bytes. (Reading and verifying the old
  tail first would cost a read per append and catch nothing more.)
* A value without a record stays without one through partial writes and appends.

Stores without transactions
---------------------------
The filesystem store writes each key atomically (by rename), but a value and its record
are two keys. A write through the stack therefore goes: read the old record (and, where
there is none, whether a value exists); write a *pending* record holding the new state
and the old one (the old value's checksums, "absent", or "unprotected"); write the value;
write the final record. An erase: pending record (absent, old), erase the value, erase
the record; ``erase_prefix`` makes every record under the prefix pending first. Partial
writes and appends: pending (new, old), the write, the final record. A value matches a
pending record when it matches either state. What a crash leaves, and what ``verify``
says of it:

* a pending record with the old value, or with the new one: reads return the value;
  ``verify`` reports an *interrupted write* (not bad), and ``--repair-missing`` makes the
  record final;
* a pending record and no value, the record allowing "absent" (an interrupted create or
  erase): reads return None; ``verify`` reports an interrupted write, and the repair
  removes the record;
* a pending record over a value written by another tool ("unprotected" state) and the
  old value still there: it is unprotected (``missing=`` applies; ``verify`` reports it
  as unprotected).

Never a mismatch, never a record without its value (tests stop every write operation at
each of its store operations, and SIGKILL writer processes). Readers read the record
first, then the value; when the check fails they read both again until two reads agree:
a writer changes the record before and after the value, so a record that reads the same
twice means no write came in between (after 8 reads that keep changing,
:class:`~kvzarr.errors.ConflictError`). What remains possible, as for the store itself:
two writers of one key at the same moment can leave one's record with the other's
value; a reader is fooled only if a writer restores exactly the record it read first
while the value changed; ``--repair-missing`` while another process writes the same keys
can record a value that is being replaced. Write one key from one writer at a time, and
repair when nothing else writes.

Speed
-----
Measured on the 2-core development machine, which other jobs share: medians move by
±30% between runs, so what decides a design below is a ratio inside one run or a
minimum over repetitions, as stated.

*Whole values* are verified by one pass of CRC-32C over the value (21 GB/s on data in
cache, 50 us per MiB) against the record's whole-value checksum, read straight from the
stored record after its own checksum (:func:`.record.final_matches`); a record is
decoded (~4 us) only to explain a failure or for a ranged read. Small values (20,000
chunks of 4 KiB, min of 7 interleaved runs, against the same store without checksums):
LMDB +3.4 us a chunk read, +8.9 us a chunk written, +10 us a single-element read;
SQLite +14.7 us a chunk read, +32 us a single-element read (a second statement: a
value and its record are two plain reads, since a ``get_many`` of the store begins and
ends a transaction).

*Bulk reads* (W1: 256 MiB of 1 MiB plain chunks). The engine copies plain chunks out
one by one in the reading thread, so the second core is free:

* over a store that hands out views of its snapshot (LMDB, memory), ``iter_values``
  verifies ahead of the reader, 4 MiB at a time on the worker pool, one group ahead,
  each group shared value by value: the worker checks from the front, the reader from
  the back once it needs the group, so on busy cores the reader waits at most for one
  value and the worst case is checking inline. In-process, interleaved, medians of 15
  reads, load ~1: plain 65.5 ms; verified ahead in 4 MiB groups, one ahead 72.6 ms
  (0.90x), two ahead 0.88x, 8 MiB groups 0.86x, 1 MiB groups 0.74x; checked inline
  0.75x; a separate pass over every value before the copies 0.77x. At load ~5 (another
  job on both cores), medians of 21: 0.95x with the group shared value by value, 0.69x
  when the reader waited for a worker's whole group.
* over a store that fetches each value into new memory (SQL, zip), each value is
  checked in the reading thread right before it is handed out, while it is in cache.
  Holding fetched values for a worker made every read fault in new pages (2 MiB held:
  21,057 minor faults per read against 129 inline; glibc gives the freed top of its
  heap back to the system), and a pool round trip costs 16-51 us here while the fetching
  thread holds the GIL the worker needs to hand its result back: in-process, min of 15
  reads, inline 0.97x of plain, one value ahead 0.62x, a hand-off per value 0.68x. So on
  SQLite the checksum's 50 us per MiB stays on the reading thread, against SQLite's
  240-290 us per MiB (medians of interleaved in-process runs: 0.80x to 0.86x).

The issue's bar, ``python3 benchmarks/run.py --peers3-python .venv/bin/python
--workloads W1 --systems kvzarr-lmdb,kvzarr-lmdb-checksum,kvzarr-sql,kvzarr-sql-checksum
--repeat 5`` (W1 "read all, uncompressed", MB/s, median of 5, in five runs while other
jobs came and went on the machine)::

    load during the run   kvzarr-lmdb  +checksum       kvzarr-sql  +checksum
    0.7 -> 2.3            3,653        3,626 (0.99x)    2,506       2,254 (0.90x)
    2.3 -> 7.6            4,717        1,818 (0.39x)    1,719       1,131 (0.66x)
    2.7 -> 5.9            1,653        1,833 (1.11x)    1,504       1,230 (0.82x)
    4.3 -> 2.4 (shared)   3,729        2,702 (0.72x)    2,353       1,417 (0.60x)
    0.9 -> 1.0 (shared)   4,308        3,578 (0.83x)    2,432       2,045 (0.84x)

The harness runs one system after another, so a job that starts mid-run lands on some
systems only: in the second run the plain stores' blosc reads dropped threefold, in the
fourth the checksum variants read blosc data twice as fast as the plain stores, and one
system's five repetitions spread from 683 to 2,733 MB/s. (The first three runs predate
the groups shared value by value.) In the quietest runs both stores sit at the bar: the
reader's own added work on LMDB is ~1 ms per 256 MiB read (profiled); the rest is the
worker's pass over the data sharing memory bandwidth with the reader's copies, and on
SQLite the checksum itself.

The scrub reads 256 MiB of 1 MiB values at 9.0 GB/s on LMDB and 4.6 GB/s on SQLite
(``Checksum.verify()``, min of 7).

*Writes* compute each value's record in one pass: the block checksums, and the
whole-value checksum combined from those of the full blocks (CRC combination, under a
microsecond a block) and continued over the last block. A 1 MiB value's record costs
(min of 7 x 100) 405 us at 4 KiB blocks, 149 at 16 KiB, 90 at 64 KiB, 84 at 256 KiB,
computed on the worker pool for big batches.

*Block size: 16 KiB.* It decides what a ranged read reads and checks (whole blocks) and
what a write computes. For the W3 shape (4096 x 4096 uint16, 1024 x 1024 shards of
64 x 64 gzip chunks, 6,260 bytes each on average; a tile read is the 4,100-byte index,
a suffix, and one inner chunk) a tile reads and checks 15.9 KiB at 4 KiB blocks,
31.4 KiB at 16 KiB, 102 KiB at 64 KiB, 292 KiB at 256 KiB (computed from the shards).
On LMDB a range read plus its checksum costs (min of 7 x 200) 10.4 us for 16 KiB,
11.3 for 32 KiB, 17.5 for 102 KiB, 68.0 for 292 KiB; on SQLite it costs the same at
every size (SQLite materializes a blob to cut a range out of it). Whole tile reads,
min of 15 x 200 (us per tile; the second line on a busier machine)::

    store    plain   4 KiB   16 KiB   64 KiB   256 KiB
    LMDB     251     352     341      456      657
             350     471     452      424      503
    SQLite   488     589     596      628      650
             525     709     689      672      854

16 KiB reads within a few microseconds of the smallest blocks and writes at 2.7 times
their speed; larger blocks save up to 65 us per MiB written and cost more on every
ranged read, which is read far more often than written. The tile-read overhead that
remains (~90 us on LMDB) is the record lookup and the bookkeeping of two ranged reads
per tile, not the block size.
"""


from .scrub import Finding, VerifyReport
from .transformer import DEFAULT_BLOCK_SIZE, RECORD_PREFIX, Checksum

__all__ = ["Checksum", "DEFAULT_BLOCK_SIZE", "Finding", "RECORD_PREFIX", "VerifyReport"]
