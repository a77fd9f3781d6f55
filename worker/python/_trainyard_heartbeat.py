"""The heartbeat of trainyard.py (docs/report-protocol.md, message `progress`): a daemon thread
sends the agent a `progress` frame every TRAINYARD_HEARTBEAT_S seconds (default 1; 0 turns it
off) on a connection of its own, carrying how many reports the worker made and how long ago the
last one was (sampled every 0.1 s). The server names a
hang from it (failure_config.hang_warn_s); torch's own collectives are not seen, so for torch
jobs a report (trainyard.report) is the progress. Started by trainyard.get_context()."""
import json
import os
import socket
import struct
import sys
import threading
import time

DEFAULT_INTERVAL_S = 1.0
SAMPLE_S = 0.1


def _interval():
    text = os.environ.get("TRAINYARD_HEARTBEAT_S", "")
    if not text:
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        print(f"trainyard: TRAINYARD_HEARTBEAT_S={text!r} is not a number of seconds from 0 to "
              f"3600; heartbeat every {DEFAULT_INTERVAL_S} s", file=sys.stderr, flush=True)
        return DEFAULT_INTERVAL_S
    return value


def _frame(msg):
    payload = json.dumps(msg, separators=(",", ":")).encode("utf-8")
    return struct.pack(">I", len(payload)) + payload


class Heartbeat:
    """Sends ctx's progress (ctx.job_id, attempt, world_rank, report_socket, _seq) until the
    process exits."""

    def __init__(self, ctx, interval):
        self.ctx = ctx
        self.interval = interval
        self.sock = None
        self.warned = False
        self.stop = threading.Event()
        self.reports = None
        self.changed = 0.0
        self.thread = threading.Thread(target=self._run, name="trainyard-heartbeat", daemon=True)

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1.0)
        try:
            s.connect(self.ctx.report_socket)
            hello = {"type": "hello", "job_id": self.ctx.job_id, "attempt": self.ctx.attempt,
                     "rank": self.ctx.world_rank, "pid": os.getpid()}
            secret = os.environ.get("TRAINYARD_REPORT_SECRET")
            if secret:
                hello["secret"] = secret
            s.sendall(_frame(hello))
        except OSError:
            s.close()
            raise
        self.sock = s

    def _send_once(self, now):
        try:
            if self.sock is None:
                self._connect()
            self.sock.sendall(_frame({"type": "progress", "op": None, "coll_seq": 0,
                                      "in_collective": False, "report_seq": self.reports,
                                      "progress_age_ms": int((now - self.changed) * 1000)}))
            self.warned = False
        except OSError as e:
            if self.sock is not None:
                self.sock.close()
                self.sock = None
            if not self.warned:
                print(f"trainyard: heartbeat: cannot reach the agent: {e}", file=sys.stderr,
                      flush=True)
            self.warned = True

    def _run(self):
        sent = None
        while not self.stop.is_set():
            now = time.monotonic()
            if self.ctx._seq != self.reports:
                self.reports = self.ctx._seq
                self.changed = now
            if sent is None or now - sent >= self.interval:
                sent = now
                self._send_once(now)
            self.stop.wait(min(self.interval, SAMPLE_S))


def start(ctx):
    """Starts the heartbeat of a managed worker (no agent, or interval 0: none). Returns it or
    None."""
    if ctx.standalone or not ctx.report_socket:
        return None
    interval = _interval()
    if interval == 0:
        return None
    hb = Heartbeat(ctx, max(interval, 0.01))
    hb.thread.start()
    return hb
