"""A separate application process for the ``listen`` kernel tests: logs through structlog + EtwRenderer.

    python listen_writer.py PROVIDER log N         # N events "tick" (i=0..N-1) with one field of each kind
    python listen_writer.py PROVIDER flood N       # N events at full speed, then 20 "after_flood" slowly
    python listen_writer.py PROVIDER keyword K N   # wait until (4, K) is enabled, then N events at keyword K
    python listen_writer.py PROVIDER activities    # a small service: nested activities on two
                                                   # threads, and two interleaved asyncio jobs

Prints ``ready <pid>`` when its provider is registered and ``done <written>`` at the end.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import os
import sys
import threading
import time
import uuid
from typing import Any

import structlog

from structlog_etw import EtwRenderer, etw_activity
from structlog_etw.write.fields import I64, STR


def wait_enabled(slot: Any, timeout: float = 60.0) -> bool:
    """Wait until a session has the slot enabled (the kernel may set the bit a moment after registration)."""
    deadline = time.monotonic() + timeout
    while not slot.word[0]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def activities(log: Any) -> None:
    """Requests with nested activities on two threads, then two asyncio jobs that interleave."""

    def handle(n: int) -> None:
        with etw_activity(log, "request", n=n) as req:
            log.info("parse", n=n)
            time.sleep(0.002)
            with etw_activity(log, "db_query", table="orders"):
                time.sleep(0.003)
                log.info("rows", count=3)
            with etw_activity(log, "render"):
                time.sleep(0.001)
            req.record(status=200)

    def worker(k: int) -> None:
        for i in range(3):
            handle(10 * k + i)
            time.sleep(0.001)

    threads = [threading.Thread(target=worker, args=(k,), name=f"worker{k}") for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def job(name: str) -> None:
        async with etw_activity(log, "job", name=name):
            await asyncio.sleep(0.004)
            log.info("job_step", name=name)
            await asyncio.sleep(0.004)

    async def both() -> None:
        first = asyncio.create_task(job("a"))
        await asyncio.sleep(0.002)
        await asyncio.gather(first, job("b"))

    asyncio.run(both())


def main(argv: list[str]) -> int:
    provider_name, mode, *rest = argv
    renderer = EtwRenderer(provider_name)
    log = structlog.wrap_logger(
        None, processors=[renderer], wrapper_class=structlog.make_filtering_bound_logger(0)
    ).bind(run=provider_name)
    provider = renderer.provider
    print(f"ready {os.getpid()}", flush=True)
    if mode in ("log", "flood", "activities") and not wait_enabled(provider.slot(4, 1)):
        print("never enabled", flush=True)
        return 1
    if mode == "log":
        for i in range(int(rest[0])):
            log.info(
                "tick",
                i=i,
                big=2**64 - 1,
                neg=-5,
                ratio=0.5,
                ok=True,
                text="héllo",
                blob=b"\x00\x01\xff",
                uid=uuid.UUID(int=i + 1),
                ip=ipaddress.ip_address("10.0.0.1"),
                ip6=ipaddress.ip_address("::1"),
                when=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
                nums=[1, 2, 3],
                inner={"a": 1, "b": "x"},
            )
        log.warning("done_logging", count=int(rest[0]))
    elif mode == "flood":
        # Straight to the provider (no structlog processors): as fast as Python can write.
        slot = provider.slot(4, 1)
        pad = "x" * 100
        for i in range(int(rest[0])):
            provider.write(slot, "flood", [("i", I64, i), ("pad", STR, pad)])
        # The kernel reports lost events in front of the next event that fits: keep writing
        # a few, slowly, so the listener (which has drained the ring by then) gets the report.
        for i in range(20):
            time.sleep(0.5)
            provider.write(slot, "after_flood", [("i", I64, i)])
    elif mode == "keyword":
        keyword, count = int(rest[0], 0), int(rest[1])
        if not wait_enabled(provider.slot(4, keyword)):
            print("never enabled", flush=True)
            return 1
        for i in range(count):
            log.info("late_keyword", etw_keyword=keyword, i=i)
    elif mode == "activities":
        activities(log)
    else:
        raise SystemExit(f"unknown mode {mode}")
    stats = provider.stats()
    print(f"stats {stats}", flush=True)
    print(f"done {stats.get('written')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
