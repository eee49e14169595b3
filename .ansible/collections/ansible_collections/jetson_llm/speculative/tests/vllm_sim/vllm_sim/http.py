# SPDX-License-Identifier: Apache-2.0
"""A small HTTP/1.1 server on asyncio streams (keep-alive, chunked responses), uvicorn-flavoured."""

from __future__ import annotations

import asyncio
import email.utils
import json

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Content Too Large",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
MAX_BODY = 64 * 1024 * 1024


class HttpError(Exception):
    def __init__(self, status, body=b""):
        super().__init__(status)
        self.status = status
        self.body = body


class Request:
    def __init__(self, method, target, version, headers, body, peer):
        self.method = method
        self.target = target
        self.path = target.split("?", 1)[0]
        self.http_version = version
        self.headers = headers
        self.body = body
        self.peer = peer

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def json(self):
        return json.loads(self.body.decode("utf-8") or "null")

    @property
    def keep_alive(self) -> bool:
        conn = (self.header("connection") or "").lower()
        if self.http_version == "HTTP/1.0":
            return conn == "keep-alive"
        return conn != "close"


async def read_request(reader: asyncio.StreamReader, peer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise HttpError(400) from None
    except asyncio.LimitOverrunError:
        raise HttpError(400) from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise HttpError(400) from None
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _unused, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(chunks)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length > MAX_BODY:
            raise HttpError(413)
        body = await reader.readexactly(length)
    return Request(method.upper(), target, version, headers, body, peer)


def _date() -> str:
    return email.utils.formatdate(usegmt=True)


class Response:
    def __init__(self, writer: asyncio.StreamWriter, keep_alive: bool):
        self.writer = writer
        self.keep_alive = keep_alive
        self.status = None
        self.started = False

    def _head(self, status, headers):
        self.status = status
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}", f"date: {_date()}", "server: uvicorn"]
        for name, value in headers:
            lines.append(f"{name}: {value}")
        if not self.keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(self, status, body=b"", content_type="application/json", extra=()):
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = [("content-length", str(len(body)))]
        if content_type and (body or status != 200):
            headers.append(("content-type", content_type))
        headers.extend(extra)
        self.writer.write(self._head(status, headers) + body)
        self.started = True
        await self.writer.drain()

    async def send_json(self, status, obj, extra=()):
        await self.send(status, json.dumps(obj, separators=(",", ":")), "application/json", extra)

    async def start_stream(self, status=200, content_type="text/event-stream; charset=utf-8"):
        self.writer.write(self._head(status, [("content-type", content_type), ("transfer-encoding", "chunked")]))
        self.started = True
        await self.writer.drain()

    async def write_chunk(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not data:
            return
        self.writer.write(b"%x\r\n" % len(data) + data + b"\r\n")
        await self.writer.drain()

    async def end_stream(self):
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
