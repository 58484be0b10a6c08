"""Derive the recorder's index columns from frames, per connection (sans-I/O).

An :class:`ConnectionIndexer` sees one connection's frames in order and returns, for each,
the columns stored beside the raw bytes: JSON-RPC kind, exact id text, method (for a
response: the method of the request it answers, paired **per direction**), sessionId (also
learnt from a ``session/new`` result), the ``sessionUpdate`` variant and the entity it
touches. It also notices connection facts: protocol version and client/agent info from
``initialize``. Everything here is re-derivable from the raw bytes (``acp-proxy reindex``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orjson import JSONDecodeError as _JSONDecodeError
from orjson import loads as _loads

from acp_proxy.acp.updates import ENTITY_OF_UPDATE, entity_key
from acp_proxy.wire.frame import Direction, other_direction
from acp_proxy.wire.jsonrpc import Kind, Message, classify


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


@dataclass(slots=True)
class ConnectionFacts:
    """What the indexer learnt about the connection from ``initialize``."""

    protocol_version: int | None = None
    client_info: Any = None
    agent_info: Any = None
    client_capabilities: Any = None
    agent_capabilities: Any = None
    changed: bool = False


@dataclass(slots=True)
class ConnectionIndexer:
    """Stateful per-connection deriver of :class:`IndexColumns`."""

    facts: ConnectionFacts = field(default_factory=ConnectionFacts)
    # (direction the request travelled, exact id text) -> (method, params)
    _pending: dict[tuple[Direction, str], tuple[str, Any]] = field(default_factory=dict)

    def index(self, direction: Direction, raw: bytes) -> IndexColumns:
        """Classify ``raw`` sent in ``direction`` and return its index columns."""
        return IndexColumns(*self.values(direction, raw))

    def values(self, direction: Direction, raw: bytes, null: Any = None) -> tuple[Any, ...]:
        """:meth:`index` as a plain tuple in :data:`INDEX_COLUMNS` order (the recorder's).

        Same result as ``index_message(direction, classify(raw)).values()`` with ``null``
        standing for a missing value (the recorder passes 0, cheaper to bind than ``None``).
        A JSON object with a string ``method`` and no ``id`` is a notification whatever else
        it holds, so the bulk of the traffic (``session/update``) skips the general path.
        """
        try:
            value = _loads(raw)
        except _JSONDecodeError:
            value = None
        if type(value) is dict and "id" not in value:
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
        columns = self.index_message(direction, classify(raw)).values()
        if null is None:
            return columns
        return tuple(null if v is None else v for v in columns)

    def index_message(self, direction: Direction, msg: Message) -> IndexColumns:
        if msg.kind == "batch":
            for item in msg.items:
                self.index_message(direction, item)
            methods = {i.method for i in msg.items if i.method}
            sessions = {s for i in msg.items if (s := _session_of(i.params)) is not None}
            return IndexColumns(
                "batch",
                method=methods.pop() if len(methods) == 1 else None,
                session_id=sessions.pop() if len(sessions) == 1 else None,
            )
        if msg.kind == "invalid":
            return IndexColumns("invalid")
        params = msg.params
        if msg.kind == "request" and msg.id is not None and msg.method is not None:
            self._pending[(direction, msg.id)] = (msg.method, params)
            self._observe_request(msg.method, params)
        if msg.kind == "response":
            assert msg.id is not None
            request = self._pending.pop((other_direction(direction), msg.id), None)
            method = request[0] if request else None
            req_params = request[1] if request else None
            session_id = _session_of(req_params)
            result = msg.result
            if session_id is None and isinstance(result, dict):
                sid = result.get("sessionId")
                session_id = sid if isinstance(sid, str) else None
            if method == "initialize" and isinstance(result, dict):
                self._observe_initialize_result(result)
            return IndexColumns("response", msg.id, method, session_id)
        session_id = _session_of(params)
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

        ``acp-proxy reindex`` uses it when the answer was recorded *before* the request
        and it has already paired the two.
        """
        self._pending.pop((direction, rpc_id), None)

    def _observe_request(self, method: str, params: Any) -> None:
        if method == "initialize" and isinstance(params, dict):
            version = params.get("protocolVersion")
            if isinstance(version, int) and not isinstance(version, bool):
                self.facts.protocol_version = version
            self.facts.client_info = params.get("clientInfo", params.get("info"))
            self.facts.client_capabilities = params.get(
                "clientCapabilities", params.get("capabilities")
            )
            self.facts.changed = True

    def _observe_initialize_result(self, result: dict[str, Any]) -> None:
        version = result.get("protocolVersion")
        if isinstance(version, int) and not isinstance(version, bool):
            self.facts.protocol_version = version
        self.facts.agent_info = result.get("agentInfo", result.get("info"))
        self.facts.agent_capabilities = result.get("agentCapabilities", result.get("capabilities"))
        self.facts.changed = True


def _session_of(params: Any) -> str | None:
    if isinstance(params, dict):
        sid = params.get("sessionId")
        if isinstance(sid, str):
            return sid
    return None
