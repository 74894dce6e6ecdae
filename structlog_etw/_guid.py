"""ETW provider id from a provider name (the EventSource / TraceLogging ``*Name`` convention).

``provider_id(name)`` = SHA-1 over a fixed namespace and the UTF-16BE bytes of
``name.upper()``, first 16 bytes read as a little-endian GUID with the version
nibble set to 5.  The same id that ``tracelog -guid *Name``, WPR and PerfView
compute for ``*Name``.  Names should be ASCII: other tools upper-case per
UTF-16 unit, Python per code point.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Final

__all__ = ["provider_id"]

_NAMESPACE: Final = bytes.fromhex("482C2DB2C39047C887F81A15BFC130FB")


def provider_id(name: str) -> uuid.UUID:
    """The ETW provider GUID for ``name`` (no trailing NUL is hashed)."""
    h = bytearray(hashlib.sha1(_NAMESPACE + name.upper().encode("utf-16-be"), usedforsecurity=False).digest())
    h[7] = (h[7] & 0x0F) | 0x50
    return uuid.UUID(bytes_le=bytes(h[:16]))
