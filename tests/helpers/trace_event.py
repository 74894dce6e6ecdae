"""A checker of the Chrome / Perfetto trace-event format (the JSON Object Format of Google's
"Trace Event Format" document): what ui.perfetto.dev and chrome://tracing need to open a file.

:func:`check_trace` returns the list of violations (empty: valid): the document is an object
with a ``traceEvents`` list; every event has ``ph``, a numeric ``ts`` (microseconds), integer
``pid`` and ``tid``; ``B``, ``i``, ``b`` and ``X`` events have a ``name``; instant events a scope
``s`` in ``g``/``p``/``t``; async events (``b``/``e``) a ``cat`` and an ``id``; ``args`` are
objects; per thread (pid, tid), ``B``/``E`` pairs balance and never end before they begin; per
async (cat, id), ``b``/``e`` balance; ``ts`` never decreases in file order.
"""

from __future__ import annotations

from typing import Any

_NAMED = {"B", "i", "I", "b", "X", "n"}


def check_trace(doc: Any) -> list[str]:
    """The format violations of a parsed trace document (see the module docstring)."""
    problems: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    stacks: dict[tuple[int, int], list[float]] = {}
    asyncs: dict[tuple[str, str], int] = {}
    last_ts = float("-inf")
    for n, ev in enumerate(doc["traceEvents"]):
        where = f"event {n} ({ev.get('ph')!r} {ev.get('name')!r})"
        ph, ts = ev.get("ph"), ev.get("ts")
        if not isinstance(ph, str) or not isinstance(ts, int | float):
            problems.append(f"{where}: ph or ts missing")
            continue
        if not isinstance(ev.get("pid"), int) or not isinstance(ev.get("tid"), int):
            problems.append(f"{where}: pid/tid not integers")
        if ph in _NAMED and not isinstance(ev.get("name"), str):
            problems.append(f"{where}: no name")
        if "args" in ev and not isinstance(ev["args"], dict):
            problems.append(f"{where}: args not an object")
        if ts < last_ts:
            problems.append(f"{where}: ts {ts} before the previous event's {last_ts}")
        last_ts = max(last_ts, ts)
        track = (ev.get("pid"), ev.get("tid"))
        if ph in ("i", "I") and ev.get("s", "t") not in ("g", "p", "t"):
            problems.append(f"{where}: bad instant scope {ev.get('s')!r}")
        if ph == "B":
            stacks.setdefault(track, []).append(ts)  # type: ignore[arg-type]
        elif ph == "E":
            stack = stacks.get(track)  # type: ignore[call-overload]
            if not stack:
                problems.append(f"{where}: E without an open B on {track}")
            elif stack.pop() > ts:
                problems.append(f"{where}: E before its B")
        elif ph in ("b", "e"):
            if not isinstance(ev.get("cat"), str) or "id" not in ev:
                problems.append(f"{where}: async event without cat or id")
                continue
            key = (ev["cat"], str(ev["id"]))
            asyncs[key] = asyncs.get(key, 0) + (1 if ph == "b" else -1)
            if asyncs[key] < 0:
                problems.append(f"{where}: e without an open b for {key}")
    problems.extend(f"{len(s)} B events never ended on {t}" for t, s in stacks.items() if s)
    problems.extend(f"{c} b events never ended for {k}" for k, c in asyncs.items() if c > 0)
    return problems
