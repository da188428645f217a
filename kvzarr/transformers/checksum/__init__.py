"""The checksum storage transformer (``"checksum"``): CRC-32C per block of every value,
stored out of band and verified on every read.

Placeholder docstring; the full design notes follow once measured.
"""

from .scrub import Finding, VerifyReport
from .transformer import DEFAULT_BLOCK_SIZE, RECORD_PREFIX, Checksum

__all__ = ["Checksum", "DEFAULT_BLOCK_SIZE", "Finding", "RECORD_PREFIX", "VerifyReport"]
