"""Capability checks as a table: which request needs which capability of the other side.

:data:`REQUIREMENTS` lists, per method and protocol version, what the peer that receives the
request must have advertised in ``initialize`` (else a ``lifecycle.capabilities`` finding);
:data:`CONTENT_REQUIREMENTS` does the same for the content blocks of a ``session/prompt``.
Replay reads the table too (:func:`required_capability`: the ``loadSession`` flag it can
advertise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from acp_proxy.acp.conformance.fields import FieldChecks
from acp_proxy.acp.conformance.state import _dig, _str
from acp_proxy.acp.rules import Side

Need = Literal["flag", "object", "declared", "auth-methods", "absent"]
"""What must hold of a capability: see :class:`Requirement`."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """What sending ``method`` needs of the receiver's capabilities on some protocol versions.

    ``method`` is a method name, or a prefix ending in ``/`` (``terminal/``) for a family, less
    the methods in ``unless``. ``holder`` is the side whose capabilities are read (the agent's
    for the client's requests). ``need`` says what must hold of the value at ``path``:
    ``flag`` it is ``true``; ``object`` it is present (``{}`` advertises it; omitted, null or
    false do not); ``declared`` it is neither omitted nor null; ``auth-methods`` the agent's
    ``authMethods`` is a non-empty list; ``absent`` the method does not exist on these versions
    (reported whatever was advertised). Nothing is reported while the capabilities are not
    known yet (no ``initialize`` seen), except for ``absent``. ``text`` is the finding's reason;
    ``{method}`` stands for the method.
    """

    method: str
    versions: Literal["v1", "v2", "all"]
    holder: Side
    need: Need
    path: tuple[str, ...]
    text: str
    unless: frozenset[str] = frozenset()

    def matches(self, method: str, version: int) -> bool:
        """Whether this requirement applies to ``method`` on protocol ``version``."""
        if self.versions != "all" and (self.versions == "v2") != (version >= 2):
            return False
        if self.method.endswith("/"):
            return method.startswith(self.method) and method not in self.unless
        return method == self.method


def _v1_session(name: str) -> Requirement:
    return Requirement(
        f"session/{name}",
        "v1",
        "agent",
        "object",
        ("sessionCapabilities", name),
        f"{{method}} without agentCapabilities.sessionCapabilities.{name}",
    )


REQUIREMENTS: tuple[Requirement, ...] = (
    # the client's requests: the agent's capabilities
    Requirement(
        "session/",
        "v2",
        "agent",
        "declared",
        ("session",),
        "{method}: the agent did not advertise capabilities.session",
        unless=frozenset({"session/cancel"}),
    ),
    Requirement(
        "session/load",
        "v2",
        "agent",
        "absent",
        (),
        "session/load is not a v2 method (use session/resume)",
    ),
    Requirement(
        "session/load",
        "v1",
        "agent",
        "flag",
        ("loadSession",),
        "session/load without agentCapabilities.loadSession",
    ),
    _v1_session("resume"),
    _v1_session("list"),
    _v1_session("close"),
    _v1_session("delete"),
    Requirement(
        "session/delete",
        "v2",
        "agent",
        "object",
        ("session", "delete"),
        "session/delete without capabilities.session.delete",
    ),
    *(
        Requirement(
            method,
            "v2",
            "agent",
            "auth-methods",
            (),
            "{method} but the agent advertised no authMethods",
        )
        for method in ("auth/login", "auth/logout")
    ),
    # the agent's requests: the client's capabilities
    *(
        Requirement(
            family,
            "v2",
            "client",
            "absent",
            (),
            "{method} is not a v2 method (v2 has no client fs or terminal capabilities)",
        )
        for family in ("fs/", "terminal/")
    ),
    Requirement(
        "fs/read_text_file",
        "v1",
        "client",
        "flag",
        ("fs", "readTextFile"),
        "fs/read_text_file without clientCapabilities.fs.readTextFile",
    ),
    Requirement(
        "fs/write_text_file",
        "v1",
        "client",
        "flag",
        ("fs", "writeTextFile"),
        "fs/write_text_file without clientCapabilities.fs.writeTextFile",
    ),
    Requirement(
        "terminal/",
        "v1",
        "client",
        "flag",
        ("terminal",),
        "{method} without clientCapabilities.terminal",
    ),
    Requirement(
        "elicitation/create",
        "all",
        "client",
        "object",
        ("elicitation",),
        "elicitation/create without client elicitation capability",
    ),
)
"""Every method's capability requirements, in the order their findings are reported."""


def _content(block: str, name: str) -> tuple[Requirement, Requirement]:
    return (
        Requirement(
            "session/prompt",
            "v1",
            "agent",
            "flag",
            ("promptCapabilities", name),
            f"session/prompt sends {block} content without "
            f"agentCapabilities.promptCapabilities.{name}",
        ),
        Requirement(
            "session/prompt",
            "v2",
            "agent",
            "object",
            ("session", "prompt", name),
            f"session/prompt sends {block} content without capabilities.session.prompt.{name}",
        ),
    )


CONTENT_REQUIREMENTS: dict[str, tuple[Requirement, Requirement]] = {
    "image": _content("image", "image"),
    "audio": _content("audio", "audio"),
    "resource": _content("resource", "embeddedContext"),
}
"""A prompt content block type -> what it needs of the agent: (v1, v2)."""

_BY_REQUEST: dict[tuple[Side, str, bool], tuple[Requirement, ...]] = {}
"""(requesting side, method, v2) -> the requirements that apply, filled as methods come."""


def requirements_for(requester: Side, method: str, version: int) -> tuple[Requirement, ...]:
    """The requirements a request of ``requester`` (``client``/``agent``) must meet."""
    key = (requester, method, version >= 2)
    found = _BY_REQUEST.get(key)
    if found is None:
        holder = "agent" if requester == "client" else "client"
        found = tuple(r for r in REQUIREMENTS if r.holder == holder and r.matches(method, version))
        if len(_BY_REQUEST) < 4096:  # method names come from recordings: keep the cache bounded
            _BY_REQUEST[key] = found
    return found


def required_capability(requester: Side, method: str, version: int) -> tuple[str, ...] | None:
    """The capability path (in the receiver's capabilities) a request needs, if one."""
    for row in requirements_for(requester, method, version):
        if row.path and row.need not in ("absent", "auth-methods"):
            return row.path
    return None


_UNKNOWN: Any = object()


def _flag(value: Any) -> bool | None:
    """A boolean capability: ``None`` when unknown (no initialize seen)."""
    if value is _UNKNOWN:
        return None
    return value is True


def _present(value: Any) -> bool | None:
    """An object capability (``{}`` advertises it; omitted or null does not)."""
    if value is _UNKNOWN:
        return None
    return value is not None and value is not False


class CapabilityChecks(FieldChecks):
    """Checks of requests against the capabilities advertised in ``initialize``."""

    def _meets(self, row: Requirement) -> bool | None:
        """Whether the receiver's capabilities meet ``row``; ``None`` while unknown."""
        caps = self._agent_caps if row.holder == "agent" else self._client_caps
        if row.need == "absent":
            return False
        if caps is None:
            return None
        if row.need == "auth-methods":
            methods = self.facts.auth_methods
            return isinstance(methods, list) and len(methods) > 0
        value = _dig(caps, *row.path)
        if row.need == "declared":
            return value is not None
        return _flag(value) if row.need == "flag" else _present(value)

    def _capabilities(self, requester: Side, seq: int, method: str, sid: str | None) -> None:
        """Report each capability the request of ``requester`` needs and was not offered."""
        for row in requirements_for(requester, method, self.effective_version):
            if self._meets(row) is False:
                text = row.text.replace("{method}", method)
                self._report("lifecycle.capabilities", (seq,), text, sid)

    def _prompt_content(self, seq: int, sid: str, prompt: Any) -> None:
        if not isinstance(prompt, list) or self._agent_caps is None:
            return
        v2 = self.effective_version >= 2
        for block in prompt:
            rows = CONTENT_REQUIREMENTS.get(_str(block, "type") or "")
            if rows is not None and self._meets(rows[v2]) is False:
                self._report("lifecycle.capabilities", (seq,), rows[v2].text, sid)
