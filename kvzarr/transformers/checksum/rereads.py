"""Reads on a store without transactions, where a writer may change a key between the
read of its record and the read of its value: what was read, and reading again until two
reads agree.

A writer through the checksum transformer changes a record before and after the value
(package docstring, "Stores without transactions"), and a reader reads the record first.
So a check that fails although the record and the value read the same twice in a row is
a real failure; one whose reads differ is read again. Also where records live, which
every part of the transformer needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import ConflictError
from ...stores.keys import RESERVED_PREFIX

#: every record lives under this prefix, at the key of the value it protects
RECORD_PREFIX = RESERVED_PREFIX + "crc/"
#: reads of a key while a writer keeps changing it, before giving up
ATTEMPTS = 8


@dataclass(slots=True)
class Read:
    """One key's answer in one attempt, what its check found (None: good) and what was
    read (compared between attempts)."""
    answer: Any
    outcome: Any
    nbytes: int
    seen: tuple[Any, ...]


def retrying(attempt: Callable[[list[str]], dict[str, Read]], keys: list[str]
             ) -> tuple[dict[str, Read], int]:
    """``attempt(keys)``, then ``attempt`` again for the keys that failed while what it
    reads keeps changing; returns the reads and the number of extra attempts.
    :class:`ConflictError` when a key changed on each of :data:`ATTEMPTS` reads."""
    reads = attempt(keys)
    failing = [k for k, r in reads.items() if r.outcome is not None]
    tries = 0
    while failing:
        if tries == ATTEMPTS:
            raise ConflictError(
                f"the value kept changing while it was verified ({ATTEMPTS} reads)",
                key=failing[0], hint="a writer rewrites it continuously; retry later")
        again = attempt(failing)
        tries += 1
        changed = [k for k in failing if again[k].seen != reads[k].seen]
        reads.update(again)
        failing = [k for k in changed if reads[k].outcome is not None]
    return reads, tries
