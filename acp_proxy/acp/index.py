"""Derive the recorder's index columns from frames, per connection (sans-I/O).

An :class:`ConnectionIndexer` sees one connection's frames in order and returns, for each,
the columns stored beside the raw bytes: JSON-RPC kind, exact id text, method (for a
response: the method of the request it answers, paired **per direction** by
:mod:`acp_proxy.acp.exchanges`), sessionId (also learnt from a ``session/new`` result), the
``sessionUpdate`` variant and the entity it touches. It also notices connection facts:
protocol version (the agent's answer wins) and client/agent info from ``initialize``
(:class:`~acp_proxy.acp.exchanges.InitializeFacts`). Every column is valid, encodable text,
also for frames with lone surrogates (:mod:`acp_proxy.wire.surrogates`). Everything here is
re-derivable from the raw bytes (``acp-proxy reindex``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orjson import JSONDecodeError as _JSONDecodeError
from orjson import loads as _loads

from acp_proxy.acp.exchanges import Exchanges, InitializeFacts, session_id_of
from acp_proxy.acp.updates import ENTITY_OF_UPDATE, entity_key
from acp_proxy.wire.frame import Direction
from acp_proxy.wire.jsonrpc import Kind, Message, elide_long_strings
from acp_proxy.wire.surrogates import classify_encodable

HUGE_FRAME_BYTES = 8 * 1024 * 1024
"""Frames larger than this are indexed with their long strings elided
(:func:`~acp_proxy.wire.jsonrpc.elide_long_strings`): the same columns, in flat memory."""


@dataclass(frozen=True, slots=True)
class IndexColumns:
    """The derived columns of one frame (all optional but ``kind``)."""

    kind: Kind
    rpc_id: str | None = None
    method: str | None = None
    session_id: str | None = None
    update_kind: str | None = None
    entity_type: str | None = None
    entity_id: str | None = None

    def values(self) -> tuple[str | None, ...]:
        """The columns in :data:`INDEX_COLUMNS` order, for an INSERT or UPDATE."""
        return (
            self.kind,
            self.rpc_id,
            self.method,
            self.session_id,
            self.update_kind,
            self.entity_type,
            self.entity_id,
        )


INDEX_COLUMNS = (
    "kind",
    "rpc_id",
    "method",
    "session_id",
    "update_kind",
    "entity_type",
    "entity_id",
)
"""The ``frames`` columns derived from the raw bytes (``acp-proxy reindex`` rebuilds them)."""


class ConnectionIndexer:
    """Stateful per-connection deriver of :class:`IndexColumns`.

    Requests are paired with their responses by :class:`~acp_proxy.acp.exchanges.Exchanges`
    and ``initialize`` is read by :class:`~acp_proxy.acp.exchanges.InitializeFacts`
    (:attr:`facts`), as every other reader of a connection does. Every text column is
    encodable (:func:`~acp_proxy.wire.surrogates.encodable`), also for frames that hold
    lone surrogates.
    """

    __slots__ = ("_exchanges", "facts", "paired_early")

    def __init__(self) -> None:
        self.facts = InitializeFacts()
        # request: (method, params); an early response: (the caller's ref, its result, or
        # None for an error response)
        self._exchanges: Exchanges[tuple[str, Any], tuple[Any, Any]] = Exchanges()
        self.paired_early: list[tuple[Any, str, str | None]] = []
        """``(ref, method, sessionId)`` for each response indexed before its request (its
        ``method`` column could not be known then) that a later request answered; the
        caller may patch that row and clear the list (``acp-proxy reindex`` does)."""

    def index(self, direction: Direction, raw: bytes, ref: Any = True) -> IndexColumns:
        """Classify ``raw`` sent in ``direction`` and return its index columns.

        ``ref`` names this frame in :attr:`paired_early` should it be a response recorded
        before its request.
        """
        return IndexColumns(*self.values(direction, raw, None, ref))

    def values(
        self, direction: Direction, raw: bytes, null: Any = None, ref: Any = True
    ) -> tuple[Any, ...]:
        """:meth:`index` as a plain tuple in :data:`INDEX_COLUMNS` order (the recorder's).

        Same result as ``index_message(direction, classify_encodable(raw)).values()`` with ``null``
        standing for a missing value (the recorder passes 0, cheaper to bind than ``None``).
        A JSON object with a string ``method`` and no ``id`` is a notification whatever else
        it holds, so the bulk of the traffic (``session/update``) skips the general path.
        """
        if self._exchanges.held:
            self._exchanges.tick()
        if len(raw) > HUGE_FRAME_BYTES:  # index the envelope, never its long strings
            raw = elide_long_strings(raw)
        try:
            value = _loads(raw)
        except _JSONDecodeError:
            value = None
        # (a NUL escape takes the general path, which keeps it as text PostgreSQL can hold)
        if type(value) is dict and "id" not in value and b"\\u0000" not in raw:
            method = value.get("method")
            if type(method) is str:
                params = value.get("params")
                if type(params) is not dict:
                    return ("notification", null, method, null, null, null, null)
                sid = params.get("sessionId")
                if type(sid) is not str:
                    sid = null
                if method == "session/update":
                    update = params.get("update")
                    if type(update) is dict:
                        variant = update.get("sessionUpdate")
                        if type(variant) is str:
                            entity = ENTITY_OF_UPDATE.get(variant)
                            if entity is None:
                                return ("notification", null, method, sid, variant, null, null)
                            key = entity_key(update)
                            eid = key[1] if key is not None else null
                            return ("notification", null, method, sid, variant, entity[0], eid)
                return ("notification", null, method, sid, null, null, null)
        value = None  # let it go before the general path parses again (a huge frame: 1x, not 2x)
        columns = self._message(direction, classify_encodable(raw), ref).values()
        if null is None:
            return columns
        return tuple(null if v is None else v for v in columns)

    def index_message(self, direction: Direction, msg: Message) -> IndexColumns:
        """The columns of an already classified frame (its strings encodable)."""
        self._exchanges.tick()
        return self._message(direction, msg, True)

    def _message(self, direction: Direction, msg: Message, ref: Any) -> IndexColumns:
        if msg.kind == "batch":
            for item in msg.items:
                self._message(direction, item, ref)
            methods = {i.method for i in msg.items if i.method}
            sessions = {s for i in msg.items if (s := session_id_of(i.params)) is not None}
            return IndexColumns(
                "batch",
                method=methods.pop() if len(methods) == 1 else None,
                session_id=sessions.pop() if len(sessions) == 1 else None,
            )
        if msg.kind == "invalid":
            return IndexColumns("invalid")
        params = msg.params
        if msg.kind == "request" and msg.id is not None and msg.method is not None:
            early = self._exchanges.request(direction, msg.id, (msg.method, params))
            if msg.method == "initialize":
                self.facts.observe_request(params)
            if early is not None:
                self.paired_early.append((early[0], msg.method, session_id_of(params)))
                if msg.method == "initialize" and early[1] is not None:
                    self.facts.observe_result(early[1])
        if msg.kind == "response":
            assert msg.id is not None
            request = self._exchanges.answer(direction, msg.id)
            if request is None:
                result = None if msg.is_error_response else msg.result
                self._exchanges.hold_early(direction, msg.id, (ref, result))
            method = request[0] if request else None
            session_id = session_id_of(request[1]) if request else None
            result = msg.result
            if session_id is None:
                session_id = session_id_of(result)
            if method == "initialize" and not msg.is_error_response:
                self.facts.observe_result(result)
            return IndexColumns("response", msg.id, method, session_id)
        session_id = session_id_of(params)
        update_kind = entity_type = entity_id = None
        if msg.method == "session/update" and isinstance(params, dict):
            update = params.get("update")
            if isinstance(update, dict):
                variant = update.get("sessionUpdate")
                if isinstance(variant, str):
                    update_kind = variant
                    if variant in ENTITY_OF_UPDATE:
                        entity_type = ENTITY_OF_UPDATE[variant][0]
                        key = entity_key(update)
                        entity_id = key[1] if key is not None else None
        return IndexColumns(
            msg.kind, msg.id, msg.method, session_id, update_kind, entity_type, entity_id
        )

    def forget_request(self, direction: Direction, rpc_id: str) -> None:
        """Stop waiting for the answer to the request ``rpc_id`` sent in ``direction``.

        For callers that paired a request with a response recorded *before* it themselves
        (``acp-proxy reindex``); the indexer already does so within its early window.
        """
        self._exchanges.pending.pop((direction, rpc_id), None)
