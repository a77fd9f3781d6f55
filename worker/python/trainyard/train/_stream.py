"""Following a job over the server's /stream websocket (docs/streams.md), standard library only:
a minimal RFC 6455 client (text frames, fragmentation, ping/pong, close; client frames masked)
over socket/ssl, and the subscription loop fit() uses to print log lines and progress as they
commit, resuming after a dropped connection from the last seq it saw."""

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import time
import urllib.parse

__all__ = ["StreamUnavailable", "WebSocket", "follow_job", "follow_jobs"]

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
MAX_MESSAGE = 64 << 20
RECONNECT_TRIES = 5  # consecutive failed connections before giving the stream up
IDLE_CHECK_S = 30.0  # with nothing on the stream for this long, ask REST whether the job ended
FATAL = ("not_authenticated", "bad_token", "too_many_clients", "unknown_job", "bad_request")


class StreamUnavailable(Exception):
    """The stream cannot be used (no stream port, handshake refused, a fatal error)."""


class Closed(Exception):
    """The connection closed or broke."""


def _mask(payload, key):
    n = len(payload)
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


class WebSocket:
    """One client connection: WebSocket(host, port, path, subprotocol, tls, timeout)."""

    def __init__(self, host, port, path, subprotocol, tls=False, timeout=10.0, cafile=None):
        sock = socket.create_connection((host, port), timeout=timeout)
        if tls:
            ctx = ssl.create_default_context(cafile=cafile)
            sock = ctx.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self._buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {subprotocol}\r\n\r\n")
        self.sock.sendall(req.encode())
        while b"\r\n\r\n" not in self._buf:
            self._fill()
            if len(self._buf) > 65536:
                raise StreamUnavailable("the websocket handshake reply is too long")
        head, _, self._buf = self._buf.partition(b"\r\n\r\n")
        status, *lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in status + " ":
            raise StreamUnavailable(f"websocket handshake refused: {status}")
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (ln.partition(":") for ln in lines)}
        want = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            raise StreamUnavailable("bad Sec-WebSocket-Accept in the handshake reply")

    def _fill(self):
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionError, ssl.SSLError) as e:
            raise Closed(str(e)) from None
        if not chunk:
            raise Closed("connection closed by the server")
        self._buf += chunk

    def _read(self, n):
        while len(self._buf) < n:
            self._fill()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        key = os.urandom(4)
        self.sock.sendall(head + key + _mask(payload, key))

    def send_json(self, obj):
        self._send(OP_TEXT, json.dumps(obj, separators=(",", ":")).encode())

    def recv_json(self, timeout):
        """The next message (parsed); answers pings. Raises Closed, or socket.timeout when
        nothing came for `timeout` seconds."""
        self.sock.settimeout(timeout)
        parts, size = [], 0
        while True:
            b0, b1 = self._read(2)
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            key = self._read(4) if b1 & 0x80 else None
            if size + n > MAX_MESSAGE:
                raise Closed("a stream message over 64 MiB")
            payload = self._read(n)
            if key:
                payload = _mask(payload, key)
            if opcode == OP_PING:
                self._send(OP_PONG, payload)
            elif opcode == OP_CLOSE:
                try:
                    self._send(OP_CLOSE, payload[:2])
                except OSError:
                    pass
                raise Closed("close frame from the server")
            elif opcode in (OP_TEXT, OP_BIN, OP_CONT):
                parts.append(payload)
                size += n
                if fin:
                    return json.loads(b"".join(parts).decode("utf-8", "replace"))

    def close(self):
        try:
            self._send(OP_CLOSE, struct.pack("!H", 1000))
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


def _connect(client, info):
    u = urllib.parse.urlsplit(client.address)
    ws = WebSocket(u.hostname, int(info["port"]), info.get("path") or "/stream",
                   info.get("protocol") or "trainyard-stream.v1", tls=u.scheme == "https",
                   timeout=client.timeout, cafile=getattr(client, "cafile", None))
    try:
        if client.token:
            ws.send_json({"type": "auth", "token": client.token})
    except OSError as e:
        ws.close()
        raise Closed(str(e)) from None
    return ws


def follow_job(client, job_id, terminal, on_log, on_report, drop_after=None, on_resume=None,
               on_event=None):
    """Follows job `job_id` over the stream until an `event` row says it reached a status in
    `terminal`; calls on_log(attempt, rank, line) for each log line and on_report(data) for each
    report row, each once, in seq order. A connection that drops (or a `closing`) is made again,
    subscribing after the last seq seen. Returns the job (REST). Raises StreamUnavailable when
    the stream cannot be used at all or fails RECONNECT_TRIES times in a row. on_resume(after):
    called before each subscription but the first; on_event(data): each status change that is
    not terminal. drop_after (tests): close the connection
    after that many rows, to exercise the resume."""
    info = (client.request("GET", "/api/v1/version") or {}).get("stream")
    if not info or not info.get("port"):
        raise StreamUnavailable("the server names no stream")
    after, fails, rows = 0, 0, 0
    while True:
        try:
            ws = _connect(client, info)
        except (OSError, Closed) as e:
            fails += 1
            if fails >= RECONNECT_TRIES:
                raise StreamUnavailable(f"cannot connect to the stream: {e}") from None
            time.sleep(0.2 * fails)
            continue
        try:
            if on_resume and (rows or fails):
                on_resume(after)
            ws.send_json({"type": "subscribe", "job": int(job_id), "after": after})
            while True:
                try:
                    m = ws.recv_json(IDLE_CHECK_S)
                except socket.timeout:
                    job = client.get_job(job_id)  # a quiet job, or a row we cannot get
                    if job["status"] in terminal:
                        return job
                    continue
                t = m.get("type")
                if t == "error":
                    if m.get("code") in FATAL:
                        raise StreamUnavailable(f"stream: {m.get('code')}: {m.get('detail')}")
                    continue
                if t == "closing":
                    break
                if t == "subscribed":
                    fails = 0
                if t != "event" or m.get("job") != int(job_id) or m.get("seq", 0) <= after:
                    continue
                after = m["seq"]
                rows += 1
                kind, data = m.get("kind"), m.get("data") or {}
                if kind == "log":
                    for line in data.get("lines") or ():
                        on_log(data.get("attempt", m.get("attempt")),
                               data.get("rank", m.get("rank")), line)
                elif kind == "report":
                    on_report(data)
                elif kind == "event" and data.get("status") in terminal:
                    return client.get_job(job_id)
                elif kind == "event" and on_event is not None:
                    on_event(data)
                if drop_after and rows % drop_after == 0:
                    break
        except (OSError, Closed):
            fails += 1
            if fails >= RECONNECT_TRIES:
                raise StreamUnavailable("the stream keeps dropping") from None
            time.sleep(0.1 * fails)
        finally:
            ws.close()


def follow_jobs(client, on_row, check, new_jobs=None, prefix=None):
    """Follows several jobs over one stream connection until check() says they are done (it
    returns a collection of job ids to follow, or None when done): each job's rows reach
    on_row(job_id, kind, data) once, in seq order per job. With `prefix`, the cluster stream is
    followed too, and a job row whose name starts with it (a sweep's next trial) calls check()
    again, which names the new jobs. check() is also called after each job's terminal event
    and when the stream stays quiet for IDLE_CHECK_S. Raises StreamUnavailable as follow_job."""
    from ._vocab import TERMINAL_JOB_STATUSES
    info = (client.request("GET", "/api/v1/version") or {}).get("stream")
    if not info or not info.get("port"):
        raise StreamUnavailable("the server names no stream")
    after, subscribed, fails, head = {}, set(), 0, None
    cluster_after = None
    while True:
        try:
            ws = _connect(client, info)
        except (OSError, Closed) as e:
            fails += 1
            if fails >= RECONNECT_TRIES:
                raise StreamUnavailable(f"cannot connect to the stream: {e}") from None
            time.sleep(0.2 * fails)
            continue
        subscribed.clear()
        try:
            if prefix is not None:
                if cluster_after is None:  # learn the head, then follow only what comes after
                    ws.send_json({"type": "subscribe", "cluster": True, "after": 0})
                    while head is None:
                        m = ws.recv_json(client.timeout)
                        if m.get("type") == "subscribed" and m.get("cluster"):
                            head = int(m.get("head") or 0)
                        elif m.get("type") == "error" and m.get("code") in FATAL:
                            raise StreamUnavailable(f"stream: {m.get('code')}")
                    ws.send_json({"type": "unsubscribe", "cluster": True})
                    cluster_after = head
                ws.send_json({"type": "subscribe", "cluster": True, "after": cluster_after,
                              "batch": True})
            want = check()
            while want is not None:
                for j in subscribed - set(want):  # ended: under the 64 subscriptions' limit
                    subscribed.discard(j)
                    ws.send_json({"type": "unsubscribe", "job": int(j)})
                for j in set(want) - subscribed:
                    subscribed.add(j)
                    ws.send_json({"type": "subscribe", "job": int(j), "after": after.get(j, 0),
                                  "batch": True})
                try:
                    m = ws.recv_json(IDLE_CHECK_S)
                except socket.timeout:
                    want = check()
                    continue
                t = m.get("type")
                if t == "error":
                    if m.get("code") in FATAL:
                        raise StreamUnavailable(f"stream: {m.get('code')}: {m.get('detail')}")
                    continue
                if t == "closing":
                    break
                if t == "subscribed":
                    fails = 0
                msgs = m.get("events") if t == "events" else [m] if t == "event" else []
                recheck = False
                for e in msgs:
                    if e.get("cluster"):
                        if e.get("seq", 0) <= cluster_after:
                            continue
                        cluster_after = e["seq"]
                        name = (e.get("data") or {}).get("name") or ""
                        if e.get("kind") == "job" and name.startswith(prefix):
                            recheck = True
                        continue
                    j = e.get("job")
                    if j not in subscribed or e.get("seq", 0) <= after.get(j, 0):
                        continue
                    after[j] = e["seq"]
                    data = e.get("data") or {}
                    on_row(j, e.get("kind"), data)
                    if e.get("kind") == "event" and data.get("status") in TERMINAL_JOB_STATUSES:
                        recheck = True
                if recheck:
                    want = check()
            if want is None:
                return
        except (OSError, Closed):
            fails += 1
            if fails >= RECONNECT_TRIES:
                raise StreamUnavailable("the stream keeps dropping") from None
            time.sleep(0.1 * fails)
        finally:
            ws.close()
