"""The chunk engine: moving chunks between numpy and a store.

* :mod:`.chunk_io` reads and writes the chunks of one array (one transaction per
  operation, decoding and encoding on the worker pool);
* :mod:`.plain_chunks` and :mod:`.point_reads` are its fast paths for chunks stored as
  plain bytes and for single elements;
* :mod:`.byte_source` reads byte ranges of one stored value (for shards);
* :mod:`.config` holds the runtime settings of an array.

The engine knows stores and codecs only through their interfaces.
"""
