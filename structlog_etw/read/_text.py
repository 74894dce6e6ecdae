"""The text of values that every writer shares: errno names, C++ ``std::to_chars`` floats,
UTC times and perf's wall-clock sample times, as Microsoft's perf-decode writes them.

The read side's text helpers, in one home: the writers of :mod:`structlog_etw.read.writers` use
them; nothing here reads event bytes.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

from .._util.bounded import BoundedCache

__all__ = [
    "KeptTexts",
    "errno_text",
    "float_text",
    "template_literal",
    "time_text",
    "uuid_text",
    "wallclock_text",
]

_ERRNO_NAMES: Final = (
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "-",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "-",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
)


def errno_text(value: int) -> str:
    """perf-decode's errno text: ``EPERM(1)``, ``ERRNO(41)``, ``ERRNO(-5)``."""
    u = value & 0xFFFFFFFF
    if 1 <= u <= len(_ERRNO_NAMES) and _ERRNO_NAMES[u - 1] != "-":
        return f"{_ERRNO_NAMES[u - 1]}({u})"
    s = u - (1 << 32) if u >= 1 << 31 else u
    return f"ERRNO({s})"


def _days_to_civil(days: int) -> tuple[int, int, int]:
    """Proleptic Gregorian (year, month, day) of a day count since 1970-01-01."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def uuid_text(raw: bytes) -> str:
    """The text of the 16 bytes ``raw`` as a UUID in big-endian field order, as
    ``str(uuid.UUID(bytes=raw))`` writes it (``8-4-4-4-12`` lower-case hex digits), without
    importing :mod:`uuid`."""
    h = bytes(raw).hex()
    if len(h) != 32:
        raise ValueError(f"a UUID is 16 bytes, not {len(h) // 2}")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@functools.lru_cache(maxsize=256)  # a capture's events share their seconds: the date once per second
def time_text(seconds: int) -> str:
    """perf-decode's time text: ``YYYY-MM-DDTHH:MM:SS`` (UTC) or ``TIME(n)`` when out of range."""
    days, sod = divmod(seconds, 86400)
    y, m, d = _days_to_civil(days)
    if not -(1 << 31) <= y - 1900 < 1 << 31:
        return f"TIME({seconds})"
    ys = f"{y:04d}" if y >= 0 else f"-{-y:03d}"
    return f"{ys}-{m:02d}-{d:02d}T{sod // 3600:02d}:{sod // 60 % 60:02d}:{sod % 60:02d}"


def wallclock_text(realtime_ns: int) -> str:
    """perf-decode's wall-clock time of a sample: ``2024-03-28T00:45:12.640913120Z`` (UTC, ns)."""
    sec, nsec = divmod(realtime_ns, 1_000_000_000)
    return f"{time_text(sec)}.{nsec:09d}Z"


def _single_bits(value: float) -> bytes | None:
    """``value`` as a float32, or None when it rounds past the largest float32 (e.g. ``3.403e+38``)."""
    try:
        return struct.pack("<f", value)
    except OverflowError:
        return None


def _shortest_digits(value: float, single: bool) -> tuple[str, int]:
    """Shortest round-trip digits ``d`` and exponent ``e`` with value == 0.d * 10**e (value > 0)."""
    if single:
        target = struct.pack("<f", value)
        for p in range(1, 10):
            s = f"{value:.{p - 1}e}"
            if _single_bits(float(s)) == target:
                break
    else:
        s = repr(value)
    mant, _, exp_s = s.partition("e")
    exp = int(exp_s) if exp_s else 0
    int_part, _, frac = mant.partition(".")
    digits = (int_part + frac).lstrip("0")
    lead_zeros = len(int_part + frac) - len((int_part + frac).lstrip("0"))
    point = len(int_part) - lead_zeros + exp
    digits = digits.rstrip("0") or "0"
    return digits, point


def float_text(value: float, single: bool = False) -> str:
    """``std::to_chars`` shortest text of a float (as perf-decode prints floats)."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value), single)
    # scientific: d.ddde+XX
    exp = point - 1
    sci = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + ("e-" if exp < 0 else "e+")
    sci += f"{abs(exp):02d}"
    if point <= 0:
        fixed = "0." + "0" * -point + digits
    elif point >= len(digits):
        fixed = str(int(abs(value)))  # an integer: C++ prints its exact digits, not the shortest ones
    else:
        fixed = digits[:point] + "." + digits[point:]
    return sign + (fixed if len(fixed) <= len(sci) else sci)


def template_literal(text: bytes) -> bytes:
    """``text`` as a constant part of a ``%`` template (``%`` doubled): how every compiled plan
    of the writers puts a fixed text beside the values it fills in."""
    return text.replace(b"%", b"%%")


_K = TypeVar("_K", bound=Hashable)


#: Bytes a kept text is reckoned at besides its own (the dict slot, the key, the bytes object).
_TEXT_OVERHEAD: Final = 100


class KeptTexts(dict[_K, bytes], Generic[_K]):
    """The texts ``write`` gave for the last ``limit`` distinct values, by value: a value seen
    is one look-up in C (``kept[value]``), a new one is written by ``__missing__`` (a writer's
    memo of repeated values: errno names, times, a thread's name).  At most ``limit`` texts and
    ``max_bytes`` of them (the values come from the data) are kept
    (:class:`~structlog_etw._util.bounded.BoundedCache`: then it starts over)."""

    __slots__ = ("_books", "_store", "write")

    def __init__(self, write: Callable[[_K], bytes], limit: int, max_bytes: int = 1 << 20) -> None:
        super().__init__()
        self.write = write
        self._books: BoundedCache[_K, bytes] = BoundedCache.of_one_reader(limit, max_bytes, entries=self)
        self._store = self._books.store

    @property
    def limit(self) -> int:
        """The most texts kept."""
        return self._books.max_entries

    def __missing__(self, value: _K) -> bytes:
        found = self.write(value)
        self._store(value, found, len(found) + _TEXT_OVERHEAD)
        return found
