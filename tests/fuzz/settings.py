"""How hard the fuzz tests try: a CI-sized default, and a long mode for a deliberate hunt.

    KVZARR_FUZZ=long python -m pytest tests/fuzz -n 2    # >= 10,000 inputs per target

Every fuzz target takes its hypothesis settings from :func:`fuzz_settings`, so one
variable scales them all. A bug a fuzz run finds gets a named regression test beside the
target (a plain test with the input written out), so it stays found in the default mode.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: ``KVZARR_FUZZ=long``: the long mode
LONG = os.environ.get("KVZARR_FUZZ", "").strip().lower() == "long"
#: inputs per target in the long mode (the floor the project promises)
LONG_EXAMPLES = 10_000


def fuzz_settings(examples: int = 200, **overrides) -> settings:
    """Hypothesis settings for one fuzz target: ``examples`` inputs in the default mode
    (sized so that every target together stays within tens of seconds in CI), at least
    :data:`LONG_EXAMPLES` in the long mode. No deadline (shared machines stall), and no
    health check on slow data generation or large inputs, which fuzzing makes on purpose."""
    return settings(
        max_examples=max(LONG_EXAMPLES, examples) if LONG else examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture],
        **overrides)
