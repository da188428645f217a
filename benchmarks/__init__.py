"""kvzarr's benchmark suite: kvzarr on each of its stores against its peers (zarr-python 3,
TensorStore, zarr-python 2) and the raw engines underneath, on the same workloads in one
run. ``python benchmarks/run.py`` is the one command; see ``benchmarks/README.md``.

Modules: ``run`` (the driver, standard library only), ``envs`` (the virtual environments
it builds), ``worker`` (runs one system on one workload in a subprocess and answers in
JSON), ``harness`` (timing, repetitions, correctness checks), ``workloads/`` (W1..W6),
``systems/`` (one adapter module per family), ``report`` (Markdown) and ``chart`` (PNG).
"""
