"""The ground floor: what every layer may use and that uses no other kvzarr layer.

* :mod:`.workers`: the one fork-safe worker pool of the process;
* :mod:`.gc_pause`: pausing the cyclic garbage collector during big reads and writes;
* :mod:`.memo`: the bounded memo for parsed, shared, immutable objects;
* :mod:`.process`: the current process id without a system call;
* :mod:`.allocator`: glibc's malloc thresholds, set once for chunk-sized buffers.
"""
