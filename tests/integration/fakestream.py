"""A scripted stand-in for trainyard-server's /stream (docs/streams.md) and the two REST calls the
CLI's follow commands make (GET /api/v1/version, GET /api/v1/jobs/{id}), for testing the CLI's
stream client on what a real server does not do on demand: drop a connection at a chosen row,
resend rows, send `closing`, fragment a message around a ping, refuse a token.

Each accepted websocket connection runs the next script of the list (the last one repeats):
script(conn) reads what the client sent and sends rows; when it returns, the connection is held
until the client closes it. Standard library only."""
import base64
import hashlib
import http.server
import json
import socket
import struct
import threading

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x8, 0x9, 0xA


class Gone(Exception):
    """The client closed the connection."""


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.sock.settimeout(30)
        self._buf = b""
        self.path = None
        self.headers = {}
        self.received = []  # JSON messages the client sent, in order
        self.pongs = []     # payloads of the pongs the client sent
        self.finished = threading.Event()  # set once its script and hold are over

    def _read_exact(self, n):
        while len(self._buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Gone()
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def handshake(self):
        while b"\r\n\r\n" not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Gone()
            self._buf += chunk
        head, _, self._buf = self._buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.path = lines[0].split(" ")[1]
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        accept = base64.b64encode(hashlib.sha1(
            (self.headers["sec-websocket-key"] + _GUID).encode()).digest()).decode()
        reply = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n")
        if "sec-websocket-protocol" in self.headers:
            reply += "Sec-WebSocket-Protocol: trainyard-stream.v1\r\n"
        self.sock.sendall((reply + "\r\n").encode())

    def frame(self, opcode, payload, fin=True):
        """Sends one unmasked server frame."""
        n = len(payload)
        head = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 1 << 16:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        self.sock.sendall(head + payload)

    def send(self, obj):
        self.frame(OP_TEXT, json.dumps(obj).encode())

    def recv(self):
        """The client's next JSON message (pongs recorded on the way). Raises Gone."""
        while True:
            b0, b1 = self._read_exact(2)
            assert b1 & 0x80, "client frames must be masked"
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read_exact(8))[0]
            mask = self._read_exact(4)
            payload = bytes(b ^ mask[i & 3] for i, b in enumerate(self._read_exact(n)))
            op = b0 & 0x0F
            if op == OP_PONG:
                self.pongs.append(payload)
            elif op == OP_CLOSE:
                raise Gone()
            elif op == OP_TEXT:
                msg = json.loads(payload)
                self.received.append(msg)
                return msg

    def expect(self, type_):
        msg = self.recv()
        assert msg["type"] == type_, msg
        return msg

    def drop(self):
        """Ends the TCP connection with no close frame (as a killed server does)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def hold(self):
        """Keeps the connection until the client goes."""
        try:
            while True:
                self.recv()
        except (Gone, OSError):
            pass
        self.sock.close()


def event(job, seq, kind, data, rank=None, attempt=1):
    return {"type": "event", "job": job, "seq": seq, "kind": kind, "attempt": attempt,
            "rank": rank, "at": "2026-11-23T07:43:04.5Z", "data": data}


def status(job, seq, s, message=""):
    return event(job, seq, "event", {"status": s, "message": message, "attempt": 1,
                                     "time": "2026-11-23T07:43:04Z"})


def log(job, seq, rank, lines, offset=0):
    return event(job, seq, "log", {"rank": rank, "attempt": 1, "offset": offset,
                                   "bytes": sum(len(x) + 1 for x in lines), "lines": lines},
                 rank=rank)


def report(job, seq, rank, step, metrics):
    return event(job, seq, "report", {"rank": rank, "attempt": 1, "k": step, "step": step,
                                      "metrics": metrics, "checkpoint": False}, rank=rank)


class FakeStream:
    def __init__(self, scripts, job_status="SUCCEEDED"):
        self.scripts = list(scripts)
        self.conns = []
        self.errors = []
        self.job_status = job_status
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}/stream"
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.http_url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self._threads.append(threading.Thread(target=self.http.serve_forever, daemon=True))
        for t in self._threads:
            t.start()

    def _handler(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/api/v1/version":
                    body = {"version": "fake", "api": "v1",
                            "stream": {"port": fake.port, "path": "/stream",
                                       "protocol": "trainyard-stream.v1"}}
                elif self.path.startswith("/api/v1/jobs/"):
                    body = {"id": int(self.path.rsplit("/", 1)[1]), "status": fake.job_status}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _accept(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            conn = Conn(s)
            script = self.scripts[min(len(self.conns), len(self.scripts) - 1)]
            self.conns.append(conn)
            threading.Thread(target=self._run, args=(conn, script), daemon=True).start()

    def _run(self, conn, script):
        try:
            conn.handshake()
            if script(conn) is not False:
                conn.hold()
        except (Gone, OSError):
            pass
        except AssertionError as e:
            self.errors.append(e)
            conn.drop()
        finally:
            conn.finished.set()

    def settled(self, timeout=10):
        """Waits until every connection's thread is done (what it recorded is complete)."""
        return all(c.finished.wait(timeout) for c in list(self.conns))

    def subscriptions(self):
        return [m for c in self.conns for m in c.received if m["type"] == "subscribe"]

    def close(self):
        self.sock.close()
        self.http.shutdown()
        self.http.server_close()
