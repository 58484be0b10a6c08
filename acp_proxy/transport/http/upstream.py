"""``acp-proxy serve --upstream http://HOST:PORT/acp``: the HTTP half relayed to a remote agent.

Each POST, SSE GET and DELETE is sent to the upstream endpoint with the client's headers
(``Acp-Connection-Id``, ``Acp-Session-Id``, cookies...; hop-by-hop headers and, when the
proxy has its own ``--token``, ``Authorization`` removed) and answered with the upstream's
status, headers (``Set-Cookie`` included) and bytes, unchanged; an SSE stream is passed
through chunk by chunk as it arrives. The proxy's own checks (Origin, token, body size)
come first; everything else (415, 406, 400, 404, 501...) is the upstream's answer.

One recorded connection (transport ``http``) per upstream ``Acp-Connection-Id``, opened by
the ``initialize`` 200 and closed by DELETE (or the server's shutdown): the POST bodies and
the SSE events' data (and a 200 body) as frames, the same ``http`` / ``sse_open`` /
``sse_close`` / ``http_delete`` events as in agent mode.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from acp_proxy.recorder.handle import ConnectionRecorder
from acp_proxy.transport.chunks import CHUNK
from acp_proxy.transport.http.h1 import header
from acp_proxy.transport.http.pool import Http1Pool, UpstreamBroke
from acp_proxy.transport.http.rules import (
    CONNECTION_ID_HEADER,
    SESSION_ID_HEADER,
    SseParser,
    classify_post,
)
from acp_proxy.transport.tls import tls_failure
from acp_proxy.transport.ws.handshake import WsSettings, peer_of, refuse
from acp_proxy.transport.ws.rules import headers_worth_keeping
from acp_proxy.wire.frame import A2C, C2A

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


class HttpUpstream:
    """The HTTP half of ``/acp`` relayed to ``upstream``, recorded per connection id."""

    def __init__(self, settings: WsSettings, upstream: str) -> None:
        self.settings = settings
        self.upstream = upstream
        self.recorders: dict[str, ConnectionRecorder] = {}
        self._http: aiohttp.ClientSession | None = None
        self._url = URL(upstream)  # parsed once, not on every request
        self._target = self._url.raw_path_qs
        self._pool = _plain_pool(self._url)  # http://: keep-alive POSTs of our own
        self._drop = HOP_BY_HOP | (
            {"authorization"} if settings.token is not None else set()
        )  # with its own --token: the proxy's token, not the upstream's

    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=30),
                auto_decompress=False,  # the bytes as they came
                cookie_jar=aiohttp.DummyCookieJar(),  # cookies are the client's, passed through
                connector=aiohttp.TCPConnector(ssl=self.settings.upstream_tls or True),
            )
        return self._http

    def _request_headers(self, request: web.Request) -> dict[str, str]:
        drop = self._drop
        return {k: v for k, v in request.headers.items() if k.lower() not in drop}

    def _forwarded(self, request: web.Request) -> list[tuple[str, str]]:
        """The client's headers to send on, repeats kept (for :class:`Http1Pool`)."""
        drop = self._drop
        return [(k, v) for k, v in request.headers.items() if k.lower() not in drop]

    @staticmethod
    def _response_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]

    def _note(
        self, rec: ConnectionRecorder | None, request: web.Request, status: int, **more: Any
    ) -> None:
        if rec is None:
            return
        detail: dict[str, Any] = {"method": request.method, "status": status}
        for name, key in ((CONNECTION_ID_HEADER, "connection"), (SESSION_ID_HEADER, "session")):
            if request.headers.get(name) is not None:
                detail[key] = request.headers[name]
        detail.update({k: v for k, v in more.items() if v is not None})
        rec.event("http", detail)

    def _unreachable(self, request: web.Request, exc: BaseException) -> web.Response:
        return refuse(
            request,
            502,
            f"the upstream {self.upstream} is unreachable: "
            f"{tls_failure(exc) or exc or type(exc).__name__}",
        )

    async def post(self, request: web.Request, body: bytes) -> web.StreamResponse:
        post = classify_post(body)
        rec = self.recorders.get(request.headers.get(CONNECTION_ID_HEADER) or "")
        if rec is not None:
            # Recorded before it is sent on: its answer may come back on the SSE stream
            # before the upstream's 202 does, and the recording keeps causal order.
            rec.frame(C2A, body)
        try:
            if self._pool is not None:
                got = await self._pool.request("POST", self._target, self._forwarded(request), body)
                status, headers, answer = got.status, got.headers, got.body
            else:
                async with await self.http().post(
                    self._url, data=body, headers=self._request_headers(request)
                ) as resp:
                    answer = await resp.read()
                    status, headers = resp.status, list(resp.headers.items())
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._unreachable(request, exc)
        except UpstreamBroke as exc:
            return refuse(request, 502, f"the upstream {self.upstream} broke its answer: {exc}")
        opened = False
        if post.is_initialize and status == 200:
            cid = header(headers, CONNECTION_ID_HEADER)
            if cid and cid not in self.recorders:
                rec = self.recorders[cid] = self.settings.recorder.connection(
                    "http",
                    peer=peer_of(request),
                    headers=headers_worth_keeping(request.headers.items(), headers),
                    label=self.settings.label,
                    agent_command=[self.upstream],
                )
                opened = True
        if rec is not None:
            if opened:  # initialize: no connection to record on until its 200
                rec.frame(C2A, body)
            if status == 200 and answer.strip():
                rec.frame(A2C, answer)
        self._note(rec, request, status, rpc=post.method, id=post.id)
        return web.Response(
            status=status,
            body=answer,
            headers=self._response_headers(headers),
        )

    async def get(self, request: web.Request) -> web.StreamResponse:
        rec = self.recorders.get(request.headers.get(CONNECTION_ID_HEADER) or "")
        try:
            resp = await self.http().get(self._url, headers=self._request_headers(request))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._unreachable(request, exc)
        async with resp:
            self._note(rec, request, resp.status)
            out = web.StreamResponse(
                status=resp.status, headers=self._response_headers(resp.headers.items())
            )
            await out.prepare(request)
            stream = {"session": request.headers.get(SESSION_ID_HEADER)}
            if resp.status == 200 and rec is not None:
                rec.event(
                    "sse_open",
                    {"stream": "session" if stream["session"] else "connection", **stream},
                )
            events = _SseRecorder(rec)
            ended_by = "upstream"
            try:
                async for chunk in resp.content.iter_chunked(CHUNK):
                    events.feed(chunk)  # recorded before it is passed on: causal order
                    try:
                        await out.write(chunk)
                    except (ConnectionError, RuntimeError):
                        ended_by = "client"
                        break
            except (aiohttp.ClientError, OSError, TimeoutError):
                ended_by = "upstream-error"
            finally:
                if resp.status == 200 and rec is not None:
                    rec.event(
                        "sse_close",
                        {
                            "stream": "session" if stream["session"] else "connection",
                            **stream,
                            "by": ended_by,
                            "events": events.count,
                            "first_id": events.first_id,
                            "last_id": events.last_id,
                        },
                    )
            with contextlib.suppress(ConnectionError, RuntimeError):
                await out.write_eof()
            return out

    async def delete(self, request: web.Request) -> web.StreamResponse:
        cid = request.headers.get(CONNECTION_ID_HEADER) or ""
        rec = self.recorders.get(cid)
        try:
            resp = await self.http().delete(self._url, headers=self._request_headers(request))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._unreachable(request, exc)
        async with resp:
            answer = await resp.read()
            self._note(rec, request, resp.status)
            if rec is not None and resp.status < 300:
                rec.event("http_delete", {"connection": cid})
                self.recorders.pop(cid, None)
                rec.close()
            return web.Response(
                status=resp.status,
                body=answer,
                headers=self._response_headers(resp.headers.items()),
            )

    async def close(self) -> None:
        for rec in self.recorders.values():
            rec.close()
        self.recorders.clear()
        if self._pool is not None:
            self._pool.close()
        if self._http is not None:
            await self._http.close()
            await asyncio.sleep(0)


def _plain_pool(url: URL) -> Http1Pool | None:
    """The keep-alive POST client for a plain ``http://`` upstream (``https``: aiohttp's)."""
    if url.scheme != "http" or url.host is None or url.port is None:
        return None
    host = url.raw_host or url.host
    netloc = f"[{host}]" if ":" in host else host
    if url.explicit_port is not None and not url.is_default_port():
        netloc += f":{url.port}"  # as aiohttp writes Host
    return Http1Pool(url.host, url.port, netloc)


class _SseRecorder:
    """Cuts a passing SSE byte stream into events; each event's data is one ``a2c`` frame
    (the events of one chunk in one journal call)."""

    def __init__(self, rec: ConnectionRecorder | None) -> None:
        self.rec = rec
        self.parser = SseParser()
        self.count = 0
        self.first_id: str | None = None
        self.last_id: str | None = None

    def feed(self, chunk: bytes) -> None:
        if self.rec is None:
            return
        events = self.parser.feed(chunk)
        if not events:
            return
        self.rec.frames(A2C, [data for data, _ in events])
        self.count += len(events)
        for _, event_id in events:
            if event_id is not None:
                text = event_id.decode("utf-8", "replace")
                self.first_id = self.first_id or text
                self.last_id = text
