"""A real HTTP server on 127.0.0.1 (port 0) for download tests: byte ranges, ETags, and scripted faults.

    with FileServer() as server:
        url = server.add("/glove.zip", data, faults=["drop"])   # first request: body cut in half
        ...
        server.log   # one dict per request: path, range, if_range, status

A route can require HTTP basic auth (`auth="user:password"`: 401 with a challenge otherwise) and send a
Last-Modified date as its validator (`last_modified=...`, `etag=None`).

A conditional request (If-None-Match naming the route's ETag, or If-Modified-Since its Last-Modified) is
answered 304 without a body.

Faults, consumed one per request: "drop" (send the headers and half the body, then close), "stall"
(half the body, then silence for `stall` seconds), or an HTTP status such as 404 or 503.
"""

from __future__ import annotations

import http.server
import re
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Route:
    data: bytes
    ranges: bool = True  # honour Range requests (answer 206); False: always 200, whole body
    etag: str | None = '"v1"'
    faults: list = field(default_factory=list)
    stall: float = 2.0
    gzip: bool = False  # compress the body (Content-Encoding: gzip) whatever the client asked
    last_modified: str | None = None  # sent as Last-Modified; If-Range may quote it
    auth: str | None = None  # "user:password": basic auth required
    if_range: bool = True  # False: ignore If-Range (a broken server: ranges of whatever it has now)


class FileServer:
    def __init__(self):
        self.routes: dict[str, Route] = {}
        self.log: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                server._serve(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def add(self, path: str, data: bytes, **kwargs) -> str:
        self.routes[path] = Route(data, **kwargs)
        return self.base + path

    def url(self, path: str) -> str:
        return self.base + path

    def requests(self, path: str | None = None) -> list[dict]:
        return [entry for entry in self.log if path is None or entry["path"] == path]

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        path = urlsplit(handler.path).path  # a proxy request names the whole URL
        entry = {
            "path": path,
            "target": handler.path,
            "range": handler.headers.get("Range"),
            "if_range": handler.headers.get("If-Range"),
            "if_none_match": handler.headers.get("If-None-Match"),
            "if_modified_since": handler.headers.get("If-Modified-Since"),
            "authorization": handler.headers.get("Authorization"),
            "status": None,
        }
        with self._lock:
            self.log.append(entry)
            route = self.routes.get(path)
            fault = route.faults.pop(0) if route and route.faults else None
        if route is None or isinstance(fault, int):
            entry["status"] = fault or 404
            handler.send_error(entry["status"])
            return
        if route.auth is not None:
            import base64

            expected = "Basic " + base64.b64encode(route.auth.encode()).decode()
            if handler.headers.get("Authorization") != expected:
                entry["status"] = 401
                handler.send_response(401)
                handler.send_header("WWW-Authenticate", 'Basic realm="glove"')
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
        if (route.etag and handler.headers.get("If-None-Match") == route.etag) or (
            route.last_modified and handler.headers.get("If-Modified-Since") == route.last_modified
        ):
            entry["status"] = 304
            handler.send_response(304)
            handler.end_headers()
            return
        data, start, status = route.data, 0, 200
        requested = re.fullmatch(r"bytes=(\d+)-", handler.headers.get("Range") or "")
        if_range = handler.headers.get("If-Range")
        if (
            requested
            and route.ranges
            and (if_range is None or not route.if_range or if_range in {route.etag, route.last_modified} - {None})
        ):
            start = int(requested[1])
            if start >= len(data):
                entry["status"] = 416
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            status = 206
        body = data[start:]
        if route.gzip:
            import gzip

            body = gzip.compress(body)
        entry["status"] = status
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Content-Type", "application/octet-stream")
        if route.gzip:
            handler.send_header("Content-Encoding", "gzip")
        if route.etag:
            handler.send_header("ETag", route.etag)
        if route.last_modified:
            handler.send_header("Last-Modified", route.last_modified)
        if route.ranges:
            handler.send_header("Accept-Ranges", "bytes")
        if status == 206:
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        handler.end_headers()
        try:
            if fault == "drop":
                handler.wfile.write(body[: len(body) // 2])
                handler.wfile.flush()
                handler.close_connection = True
                return
            if fault == "stall":
                handler.wfile.write(body[: len(body) // 2])
                handler.wfile.flush()
                time.sleep(route.stall)
                handler.wfile.write(body[len(body) // 2 :])
                return
            handler.wfile.write(body)
        except OSError:  # the client gave up (timeout test)
            pass
