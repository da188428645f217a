"""Interoperability tests: kvzarr against zarr-python 3.1 and TensorStore over a shared
filesystem store, plus golden files written by those peers."""
