"""One connection's JSON-RPC exchanges and ``initialize`` facts: the one home of both (sans-I/O).

Every reader of a connection (the recorder's :mod:`~acp_proxy.acp.index`, the
:mod:`~acp_proxy.acp.model` behind ``show``, :mod:`~acp_proxy.acp.stats` and the
:mod:`~acp_proxy.acp.conformance` checker) pairs requests with responses through
:class:`Exchanges` and learns the protocol version, client/agent info and capabilities
through :class:`InitializeFacts`, so they cannot disagree.

Pairing rules:

- **Per direction.** Both peers number their own requests: the client's id 1 and the
  agent's id 1 are different requests. A request is keyed by ``(direction it travelled,
  id)``; a response travelling the other way answers it.
- **Ids by exact JSON text** (``1``, ``1.0`` and ``"1"`` are different ids), as
  :func:`acp_proxy.wire.jsonrpc.classify` spells them.
- **Early responses.** The proxy forwards first and records after, and the two directions
  are recorded independently, so a response can be recorded just *before* its request. A
  response that answers no pending request is held for :data:`EARLY_WINDOW` frames (at most
  that many are held at once); a request arriving in that window takes it. Responses that
  leave the window unpaired are handed back by :meth:`Exchanges.tick` (they answer
  nothing). Memory is bounded whatever the recording holds.

``initialize`` facts: the client's request says what it asks (``protocolVersion``,
``clientInfo``/v2 ``info``, ``clientCapabilities``/v2 ``capabilities``); the agent's result
says what was agreed. The **agent's answered version wins**; until the answer arrives (or
when it never does) the requested version stands.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from acp_proxy.wire.frame import Direction, other_direction

_NOTHING: tuple[Any, ...] = ()  # tick()'s answer when nothing is held

EARLY_WINDOW = 64
"""How many frames (and, at most, how many responses at once) an early response is held
waiting for its request before it counts as answering nothing."""

Key = tuple[Direction, str]
"""(direction the request travelled, exact id text)."""

Req = TypeVar("Req")
Resp = TypeVar("Resp")


class Exchanges(Generic[Req, Resp]):
    """Pending requests (``Req``: whatever the caller keeps) and held early responses.

    Call :meth:`request` for each request, :meth:`answer` for each response (and
    :meth:`hold_early` when it answered nothing pending), :meth:`tick` once per frame and
    :meth:`expire_all` at the end of the connection.
    """

    __slots__ = ("_frames", "held", "pending", "window")

    def __init__(self, window: int = EARLY_WINDOW) -> None:
        self.window = window
        self.pending: dict[Key, Req] = {}
        """Requests waiting for their response, in the order they were sent."""
        self.held: OrderedDict[Key, tuple[int, Resp]] = OrderedDict()
        """Early responses waiting for their request (read-only for callers): a hot loop
        may skip :meth:`tick` while this is empty."""
        self._frames = 0  # frames ticked while something was held

    def request(self, direction: Direction, rpc_id: str, req: Req) -> Resp | None:
        """A request sent in ``direction``: its early response if one waits, else ``None``.

        When an early response is returned the request is *not* left pending (it is
        answered). Otherwise it is pending (replacing a pending request with the same id).
        """
        key = (direction, rpc_id)
        if self.held:
            held = self.held.pop(key, None)
            if held is not None:
                return held[1]
        self.pending[key] = req
        return None

    def answer(self, direction: Direction, rpc_id: str) -> Req | None:
        """A response sent in ``direction``: pop and return the request it answers, if pending."""
        return self.pending.pop((other_direction(direction), rpc_id), None)

    def hold_early(self, direction: Direction, rpc_id: str, resp: Resp) -> None:
        """Hold a response that answered nothing pending, in case its request comes next."""
        key = (other_direction(direction), rpc_id)
        self.held.pop(key, None)
        self.held[key] = (self._frames, resp)

    def tick(self) -> Sequence[tuple[Key, Resp]]:
        """One more frame went by: return the early responses that left the window."""
        early = self.held
        if not early:
            return _NOTHING
        self._frames += 1
        out: list[tuple[Key, Resp]] = []
        while early:
            key, (at, resp) = next(iter(early.items()))
            if self._frames - at < self.window and len(early) <= self.window:
                break
            del early[key]
            out.append((key, resp))
        return out

    def expire_all(self) -> list[tuple[Key, Resp]]:
        """End of the connection: every early response still held answers nothing."""
        out = [(key, resp) for key, (_at, resp) in self.held.items()]
        self.held.clear()
        return out

    def clear(self) -> None:
        self.pending.clear()
        self.held.clear()


def protocol_version_of(payload: Any) -> int | None:
    """``protocolVersion`` of an initialize params/result object, when it is an integer."""
    if isinstance(payload, dict):
        version = payload.get("protocolVersion")
        if isinstance(version, int) and not isinstance(version, bool):
            return version
    return None


def session_id_of(payload: Any) -> str | None:
    """``sessionId`` of a params or result object, when it is a string."""
    if isinstance(payload, dict):
        sid = payload.get("sessionId")
        if isinstance(sid, str):
            return sid
    return None


@dataclass(slots=True)
class InitializeFacts:
    """What ``initialize`` said: versions asked and answered, both peers' info and capabilities.

    v1 and v2 field names are both read (``clientInfo``/``info``,
    ``clientCapabilities``/``capabilities``, ``agentInfo``/``info``,
    ``agentCapabilities``/``capabilities``). ``changed`` is set whenever a fact is learnt
    (the recorder clears it when it has written the facts to the connection row).
    """

    requested_version: int | None = None
    answered_version: int | None = None
    client_info: Any = None
    agent_info: Any = None
    client_capabilities: Any = None
    agent_capabilities: Any = None
    auth_methods: Any = None
    request_seen: bool = False
    result_seen: bool = False
    changed: bool = False

    @property
    def protocol_version(self) -> int | None:
        """The agent's answered version, else the one the client asked for (else ``None``)."""
        return (
            self.answered_version if self.answered_version is not None else (self.requested_version)
        )

    def observe_request(self, params: Any) -> None:
        """The client's ``initialize`` params."""
        if not isinstance(params, dict):
            params = {}
        self.request_seen = True
        self.requested_version = protocol_version_of(params)
        self.client_info = params.get("clientInfo", params.get("info"))
        caps = params.get("clientCapabilities")
        self.client_capabilities = params.get("capabilities") if caps is None else caps
        self.changed = True

    def observe_result(self, result: Any) -> None:
        """The agent's successful ``initialize`` result (ignored unless an object)."""
        if not isinstance(result, dict):
            return
        self.result_seen = True
        version = protocol_version_of(result)
        if version is not None:
            self.answered_version = version
        self.agent_info = result.get("agentInfo", result.get("info"))
        caps = result.get("agentCapabilities")
        self.agent_capabilities = result.get("capabilities") if caps is None else caps
        self.auth_methods = result.get("authMethods")
        self.changed = True
