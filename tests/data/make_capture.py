"""How tests/data/structlog-etw-capture.perf.data was made (run as root in the user_events kernel guest).

Registers four MyCompany_MyService tracepoints through user_events_data (DIAG_IOCSREG), starts
``perf record -a -k monotonic`` on them, waits for the enable words, writes six events encoded
by structlog_etw's EventHeaderEncoder with writev, and stops perf::

    vng --disable-kvm -r ../shared/kernel/bzImage-6.12.117-user-events --memory 1G --cpus 2 \\
        --rwdir "$PWD/out" -- /tmp/venv/bin/python tests/data/make_capture.py "$PWD/out/perf.data"

(perf exits with "failed to mmap file" about its build-id pass on the read-only guest root;
the recording itself is complete.)
"""

from __future__ import annotations

import ctypes
import datetime as dt
import fcntl
import ipaddress
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from structlog_etw.formats.eventheader import register_command, tracepoint_name
from structlog_etw.write.eventheader import EventHeaderEncoder
from structlog_etw.write.fields import to_fields

DIAG_IOCSREG = 0xC0082A00
PROVIDER = "MyCompany_MyService"
ACTIVITY = uuid.UUID("6f1c2a9e-8c1d-4f3e-9a57-1b2c3d4e5f60")


def main(out: str) -> None:
    """Register, record, write, stop."""
    fd = os.open("/sys/kernel/tracing/user_events_data", os.O_WRONLY)
    keep: list[Any] = []  # enable words and commands must outlive the registrations
    index: dict[str, int] = {}
    names = [tracepoint_name(PROVIDER, lv, kw) for lv, kw in ((4, 1), (2, 1), (4, 4), (5, 1))]
    for name in names:
        word = ctypes.c_uint32(0)
        cmd = ctypes.create_string_buffer(register_command(name).encode())
        addrs = (ctypes.addressof(word), ctypes.addressof(cmd))
        reg = bytearray(struct.pack("<IBBHQQI", 28, 0, 4, 0, *addrs, 0))
        fcntl.ioctl(fd, DIAG_IOCSREG, (ctypes.c_char * 28).from_buffer(reg))
        keep.append((word, cmd))
        index[name] = struct.unpack_from("<I", bytes(reg), 24)[0]
    events = [a for n in names for a in ("-e", f"user_events:{n}")]
    perf = subprocess.Popen(
        ["perf", "record", "-a", "-k", "monotonic", "-o", out, *events],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 20
    while time.time() < deadline and not all(w.value for w, _ in keep):
        time.sleep(0.05)
    time.sleep(1.0)  # perf enables per CPU after the bit flips: give it a moment
    encoder = EventHeaderEncoder()

    def write(tp: str, level: int, event: str, opcode: int = 0, **fields: Any) -> None:
        activity = fields.pop("activity", None)
        data = encoder.encode(event, to_fields(fields.items()), level, opcode=opcode, activity_id=activity)
        assert data is not None
        os.writev(fd, [struct.pack("<i", index[tp]), data])

    write(names[0], 4, "service_started", version="1.4.2", port=8080, debug=False)
    write(names[0], 4, "request", opcode=1, activity=ACTIVITY.bytes, method="GET", path="/users/42")
    write(
        names[2],
        4,
        "user_login",
        user="ann",
        attempts=3,
        source=ipaddress.IPv4Address("192.0.2.7"),
        session=uuid.UUID("0b7e8e43-3c52-4d5e-bd1e-2f9c1d0a7b11"),
        at=dt.datetime(2026, 11, 29, 17, 30, tzinfo=dt.timezone.utc),
    )
    write(names[0], 4, "request", opcode=2, activity=ACTIVITY.bytes, status=200, duration_ms=12.5)
    order = {"id": 1017, "total": 49.9, "items": [3, 7]}
    write(names[1], 2, "payment_failed", order=order, error="card declined", retry=True)
    write(names[3], 5, "cache_stats", hits=[120, 98, 143], ratio=0.913, raw=b"\x00\x01\xfe")
    time.sleep(1.0)
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate(timeout=30)
    print("perf exit", perf.returncode, err.decode()[-500:])


if __name__ == "__main__":
    main(sys.argv[1])
