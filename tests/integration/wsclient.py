"""A small RFC 6455 websocket client (standard library only) for speaking the agent protocol
(docs/agent-protocol.md) to a real trainyard-server from tests: text frames of JSON, masked as a
client must, with ping/pong, fragmentation and close handled. Not a general-purpose client: no
TLS, no extensions, one text message at a time."""
import base64
import hashlib
import json
import os
import socket
import struct
import time

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class Closed(Exception):
    """The server closed the connection (or it broke)."""


class WebSocket:
    def __init__(self, url, subprotocol="trainyard-agent.v1", timeout=10.0, rcvbuf=None):
        """Connects to ws://host:port/path and completes the opening handshake. rcvbuf: a small
        socket receive buffer (bytes), for a client meant to fall behind quickly."""
        assert url.startswith("ws://"), url
        rest = url[len("ws://"):]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.rpartition(":")
        if rcvbuf:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, int(port)))
        else:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.settimeout(timeout)
        self._buf = b""
        self.closed = False
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                   f"Sec-WebSocket-Version: 13\r\n")
        if subprotocol:
            request += f"Sec-WebSocket-Protocol: {subprotocol}\r\n"
        self.sock.sendall((request + "\r\n").encode())
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        status_line, *header_lines = head.split("\r\n")
        if " 101 " not in status_line + " ":
            raise ConnectionError(f"websocket handshake refused: {status_line}")
        headers = {}
        for line in header_lines:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        want = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            raise ConnectionError("bad Sec-WebSocket-Accept in the handshake reply")
        self.subprotocol = headers.get("sec-websocket-protocol")

    # ---- raw I/O ----

    def _read_until(self, marker):
        while marker not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed("connection closed during the handshake")
            self._buf += chunk
        head, _, self._buf = self._buf.partition(marker)
        return head

    def _read_exact(self, n):
        while len(self._buf) < n:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError as e:
                self.closed = True
                raise Closed(str(e)) from None
            if not chunk:
                self.closed = True
                raise Closed("connection closed by the server")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send_frame(self, opcode, payload):
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _recv_frame(self):
        b0, b1 = self._read_exact(2)
        fin, opcode = bool(b0 & 0x80), b0 & 0x0F
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read_exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(8))[0]
        mask = self._read_exact(4) if b1 & 0x80 else None
        payload = self._read_exact(n)
        if mask:
            payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        return fin, opcode, payload

    # ---- messages ----

    def send_text(self, text):
        self._send_frame(OP_TEXT, text.encode())

    def send_json(self, obj):
        self.send_text(json.dumps(obj, separators=(",", ":")))

    def recv_text(self, timeout=10.0):
        """The next text message; answers pings. Raises Closed or socket.timeout."""
        self.sock.settimeout(timeout)
        parts = []
        while True:
            fin, opcode, payload = self._recv_frame()
            if opcode == OP_PING:
                self._send_frame(OP_PONG, payload)
                continue
            if opcode == OP_PONG:
                continue
            if opcode == OP_CLOSE:
                self.closed = True
                try:
                    self._send_frame(OP_CLOSE, payload[:2])
                except OSError:
                    pass
                raise Closed("close frame from the server")
            parts.append(payload)
            if fin:
                return b"".join(parts).decode()

    def recv_json(self, timeout=10.0):
        return json.loads(self.recv_text(timeout))

    def wait_for(self, pred, timeout=10.0):
        """Reads messages until pred(msg) is true and returns that message; the others are
        kept in self.skipped."""
        deadline = time.time() + timeout
        self.skipped = getattr(self, "skipped", [])
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"no matching message in {timeout}s; got {self.skipped}")
            try:
                msg = self.recv_json(timeout=left)
            except socket.timeout:
                raise TimeoutError(f"no matching message in {timeout}s; got {self.skipped}") \
                    from None
            if pred(msg):
                return msg
            self.skipped.append(msg)

    def expect_closed(self, timeout=10.0):
        """Reads until the server closes the connection; returns the messages read meanwhile."""
        got = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                got.append(self.recv_json(timeout=max(0.01, deadline - time.time())))
            except Closed:
                return got
            except socket.timeout:
                break
        raise AssertionError(f"the server did not close the connection; got {got}")

    def close(self):
        if not self.closed:
            try:
                self._send_frame(OP_CLOSE, struct.pack("!H", 1000))
            except OSError:
                pass
        self.closed = True
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
