"""The six workloads, W1..W6, one module each. Every module has ``TITLE``, ``DEFAULTS``
(the parameters at scale 1), ``scaled(params, factor)`` and
``run(system, params, recorder, repeat)``.
"""

from __future__ import annotations

import importlib
from typing import Any

MODULES = {"W1": "w1_bulk", "W2": "w2_small_chunks", "W3": "w3_sharding",
           "W4": "w4_hierarchy", "W5": "w5_hyperslab", "W6": "w6_writers"}


def load(name: str) -> Any:
    return importlib.import_module(f"{__name__}.{MODULES[name]}")
