"""Helpers of the ``sharding_indexed`` codec (:mod:`kvzarr.codecs.sharding_indexed`):
the shard layout and index (:mod:`.layout`), the append-only write strategy
(:mod:`.append`) and the parallel encoder of whole shards (:mod:`.encoder`)."""
