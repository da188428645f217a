"""Helpers of the ``sharding_indexed`` codec (:mod:`kvzarr.codecs.sharding_indexed`):
the shard layout and index (:mod:`.layout`) and the shared inner-chunk thread pool
(:mod:`.parallel`)."""
