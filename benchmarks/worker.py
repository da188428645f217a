"""Runs one system on one workload and answers in JSON: the driver starts it as
``python -m benchmarks.worker`` in the system's environment, writes the job to its stdin
and reads the result from the line of stdout that starts with ``RESULT_MARK``.

Job: ``{"system", "workload", "scale", "params", "repeat", "budget", "workdir",
"profile"}``: the workload's DEFAULTS are scaled by ``scale``, then ``params`` override.
Result: ``{"system", "workload", "metrics": [...], "error", "seconds", "profile"}``.
A crash or an exception is reported in ``error``; a wrong answer (CorrectnessError)
discards every metric of the workload, so it never shows up as a speed.

``run_job`` is the same thing in-process, for tests and for a broken-on-purpose system.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

RESULT_MARK = "@@BENCH-RESULT@@ "


def run_job(job: dict[str, Any], system: Any = None) -> dict[str, Any]:
    """Run ``job``; ``system`` overrides the adapter named in the job."""
    from .harness import CorrectnessError, Recorder, Unsupported
    from .systems import make_system
    from .workloads import load

    warnings.simplefilter("ignore")
    workload = load(job["workload"])
    params = dict(workload.DEFAULTS)
    if float(job.get("scale", 1.0)) != 1.0:
        params = workload.scaled(params, float(job["scale"]))
    params.update(job.get("params", {}))
    rec = Recorder(budget=float(job.get("budget", 5)))
    root = Path(tempfile.mkdtemp(prefix=f"{job['system']}-{job['workload']}-",
                                 dir=job.get("workdir")))
    out: dict[str, Any] = {"system": job["system"], "workload": job["workload"],
                           "params": params, "error": None}
    t0 = time.perf_counter()
    profiler = None
    try:
        if system is None:
            system = make_system(job["system"], root)
        unavailable = getattr(system, "unavailable", None)
        if unavailable:                 # e.g. no server named for a PostgreSQL system
            raise Unsupported(unavailable)
        if job.get("profile"):
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
        workload.run(system, params, rec, int(job.get("repeat", 3)))
    except CorrectnessError as e:
        out["error"] = f"WRONG ANSWER: {e}"
        rec.metrics.clear()
    except Unsupported as e:
        out["error"] = f"unsupported: {e}"
    except Exception as e:  # reported, not fatal: the other metrics still count
        out["error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc(limit=8)
    finally:
        if profiler is not None:
            profiler.disable()
            out["profile"] = _profile_text(profiler, job["profile"])
        shutil.rmtree(root, ignore_errors=True)
    out["metrics"] = rec.results()
    out["seconds"] = time.perf_counter() - t0
    return out


def _profile_text(profiler: Any, path: str) -> str:
    """Write the top functions by own time and by cumulative time to ``path``."""
    import io
    import pstats
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(35)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(buf.getvalue())
    return path


def main() -> None:
    job = json.loads(sys.stdin.read())
    result = run_job(job)
    sys.stdout.write("\n" + RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
