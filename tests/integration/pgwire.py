"""The tests' SQL, sent over one kept PostgreSQL connection instead of a `psql` process a call.

A `psql -c` costs ~0.2 CPU-seconds on the 2-core CI machine (the process, then a new backend),
and the suite made several per test (docs/decisions.md, "The tests' SQL over a kept
connection"). Session speaks the protocol's simple query flow over the cluster's unix socket
with trust authentication, and answers as `psql -XAtq -v ON_ERROR_STOP=1 -c SQL` prints:
every statement's rows, columns joined by "|", rows by newlines, NULL as the empty string, each
value in PostgreSQL's text form. An error raises subprocess.CalledProcessError, as psql's exit
status 1 did, its stderr the error as psql's VERBOSITY=verbose prints it. After each call the
session is reset as psql's exit reset it: an open transaction rolled back, settings, temporary
tables, prepared statements, LISTENs and advisory locks discarded."""
import os
import socket
import struct
import subprocess

PROTOCOL_3 = 196608


class Session:
    def __init__(self, sockdir, db, user="trainyard"):
        self.sockdir, self.db, self.user = sockdir, db, user
        self.sock = None

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.path.join(self.sockdir, ".s.PGSQL.5432"))
        self.sock, self.buf = s, b""
        params = f"user\0{self.user}\0database\0{self.db}\0\0".encode()
        s.sendall(struct.pack("!ii", 8 + len(params), PROTOCOL_3) + params)
        while True:
            kind, body = self._message()
            if kind == b"R" and struct.unpack("!i", body[:4])[0] != 0:
                self.close()
                raise RuntimeError("pgwire: the cluster asks for a password (trust expected)")
            if kind == b"E":
                self.close()
                raise subprocess.CalledProcessError(2, ["psql", "-d", self.db], "",
                                                    _error_text(body))
            if kind == b"Z":
                return

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("PostgreSQL closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _message(self):
        kind, length = struct.unpack("!ci", self._read(5))
        return kind, self._read(length - 4)

    def _simple(self, sql):
        """Runs SQL as one simple query: (rows as text lines, error text or None, status)."""
        data = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!i", 4 + len(data)) + data)
        lines, error = [], None
        while True:
            kind, body = self._message()
            if kind == b"D":
                lines.append("|".join(_columns(body)))
            elif kind == b"d":  # COPY ... TO STDOUT: psql prints the data as it comes
                lines.append(body.decode().rstrip("\n"))
            elif kind == b"G":  # COPY ... FROM STDIN: -c has no input to give it
                msg = b"psql -c has no standard input for COPY\0"
                self.sock.sendall(b"f" + struct.pack("!i", 4 + len(msg)) + msg)
            elif kind == b"E":
                error = _error_text(body)
            elif kind == b"Z":
                return lines, error, body

    def _idle_and_open(self):
        """False when the backend has gone (a restarted cluster, a terminated backend): an idle
        connection has nothing to read but its end, or the FATAL error sent before it."""
        self.sock.setblocking(False)
        try:
            self.sock.recv(1, socket.MSG_PEEK)
            return False
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            self.sock.setblocking(True)

    def query(self, sql):
        if self.sock is not None and (self.buf or not self._idle_and_open()):
            self.close()
        if self.sock is None:
            self._connect()
        try:
            lines, error, status = self._simple(sql)
        except ConnectionError as e:
            self.close()
            raise subprocess.CalledProcessError(2, ["psql", "-d", self.db, "-c", sql], "",
                                                f"psql: the connection was lost: {e}")
        if status != b"I":
            self._simple("ROLLBACK")
        self._simple("DISCARD ALL")
        out = "\n".join(lines)
        if error is not None:
            raise subprocess.CalledProcessError(1, ["psql", "-d", self.db, "-c", sql], out, error)
        return out.strip()

    def close(self):
        if self.sock is not None:
            try:
                self.sock.sendall(b"X" + struct.pack("!i", 4))
            except OSError:
                pass
            self.sock.close()
            self.sock = None


def _columns(body):
    (n,) = struct.unpack("!h", body[:2])
    pos, out = 2, []
    for _ in range(n):
        (size,) = struct.unpack("!i", body[pos:pos + 4])
        pos += 4
        if size < 0:
            out.append("")
        else:
            out.append(body[pos:pos + size].decode())
            pos += size
    return out


def _error_text(body):
    """As psql prints an error with VERBOSITY=verbose: severity, SQLSTATE and message, then the
    detail and hint lines."""
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[part[:1]] = part[1:].decode(errors="replace")
    text = f"{fields.get(b'S', 'ERROR')}:  {fields.get(b'C', '')}: {fields.get(b'M', '')}"
    for key, label in ((b"D", "DETAIL"), (b"H", "HINT")):
        if key in fields:
            text += f"\n{label}:  {fields[key]}"
    return text
