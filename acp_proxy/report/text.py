"""How values read in text output: times and a frame's one-line description."""

from __future__ import annotations

import time

from acp_proxy.wire.frame import Frame


def fmt_time(ts: object) -> str:
    """A stored wall-clock time as local ``YYYY-MM-DD HH:MM:SS``; never raises.

    ``None`` is ``-``; a value no clock can show (``-1e308``, NaN, text in a REAL column of
    an imported file) is shown as ``?`` and the value, so a reader never crashes on a row.
    """
    if ts is None:
        return "-"
    try:
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            raise TypeError
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (TypeError, ValueError, OverflowError, OSError):
        return f"?{ts!r}"[:40]


def fmt_frame_what(f: Frame, id_mark: str = "#") -> str:
    """One frame's kind, method, ``id_mark`` + id and [update kind], e.g. ``request prompt #3``."""
    what = f.kind or "?"
    if f.method:
        what += f" {f.method}"
    if f.rpc_id is not None:
        what += f" {id_mark}{f.rpc_id}"
    if f.update_kind:
        what += f" [{f.update_kind}]"
    return what
