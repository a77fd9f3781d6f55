#!/usr/bin/python3
"""Simulated agents: N websocket connections to trainyard-server, each registering one node and
heartbeating (docs/agent-protocol.md). One process, asyncio, Python standard library only; the
RFC 6455 client (handshake, masked text frames, ping/pong, close) is written out below.

    bench/memory_loadgen.py --url ws://127.0.0.1:8081 --token-file DATA/cluster.token --nodes 1000

Prints "registered N" once every node is registered (then a status line every --report-s), and
keeps heartbeating until SIGTERM/SIGINT or stdin closes (with --stdin-eof). Only for addresses
on this machine. Used by bench/memory.py; not a test.
"""
import argparse
import asyncio
import base64
import hashlib
import json
import os
import resource
import signal
import struct
import sys
import time
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
SUBPROTOCOL = "trainyard-agent.v1"


class WSClosed(Exception):
    pass


class WS:
    """A minimal RFC 6455 client connection (text frames, masking, ping/pong, close)."""

    def __init__(self, reader, writer):
        self.r, self.w = reader, writer

    @classmethod
    async def connect(cls, host, port, path, subprotocol, timeout=30):
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {subprotocol}\r\n\r\n")
        writer.write(req.encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        lines = head.decode("latin-1").split("\r\n")
        if not lines[0].startswith("HTTP/1.1 101"):
            writer.close()
            raise ConnectionError(f"handshake refused: {lines[0]}")
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            writer.close()
            raise ConnectionError("bad Sec-WebSocket-Accept")
        if hdrs.get("sec-websocket-protocol") != subprotocol:
            writer.close()
            raise ConnectionError(f"server chose subprotocol {hdrs.get('sec-websocket-protocol')}")
        return cls(reader, writer)

    def _frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        # XOR with the repeated 4-byte mask, via one big integer (fast enough in pure Python).
        reps = (n + 3) // 4
        m = int.from_bytes((mask * reps)[:n], "big") if n else 0
        body = (int.from_bytes(payload, "big") ^ m).to_bytes(n, "big") if n else b""
        return head + mask + body

    async def send_text(self, text):
        self.w.write(self._frame(0x1, text.encode()))
        await self.w.drain()

    async def recv(self):
        """The next text message (str); answers pings; raises WSClosed on close/EOF."""
        message = b""
        while True:
            try:
                b0, b1 = await self.r.readexactly(2)
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                raise WSClosed(str(e))
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", await self.r.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", await self.r.readexactly(8))[0]
            mask = await self.r.readexactly(4) if b1 & 0x80 else None
            data = await self.r.readexactly(n) if n else b""
            if mask:
                data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
            if opcode == 0x9:
                self.w.write(self._frame(0xA, data))
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                try:
                    self.w.write(self._frame(0x8, data[:2]))
                except Exception:
                    pass
                raise WSClosed("close frame")
            message += data
            if fin:
                return message.decode()

    def close(self):
        try:
            self.w.write(self._frame(0x8, struct.pack("!H", 1000)))
            self.w.close()
        except Exception:
            pass


class Node:
    def __init__(self, i, prefix, cpus, memory_mb):
        self.id = f"{prefix}-{i:05d}"
        self.cpus, self.memory_mb = cpus, memory_mb
        self.ws = None
        self.registered = asyncio.Event()
        self.heartbeats = 0
        self.messages = 0
        self.error = None


async def run_node(node, host, port, token, sem, stop, interval_override):
    async with sem:  # bounded handshakes in flight
        try:
            node.ws = await WS.connect(host, port, "/agent", SUBPROTOCOL)
            await node.ws.send_text(json.dumps({
                "type": "register", "token": token,
                "node": {"id": node.id, "hostname": node.id, "address": "127.0.0.1",
                         "resources": {"CPU": node.cpus, "memory_mb": node.memory_mb, "GPU": []},
                         "gpu_type": None, "labels": {"sim": "loadgen"}, "version": "loadgen",
                         "port_range": [29500, 29999]},
                "workers": []}))
            reply = json.loads(await node.ws.recv())
        except Exception as e:
            node.error = f"{type(e).__name__}: {e}"
            node.registered.set()
            return
    if reply.get("type") != "registered":
        node.error = f"refused: {reply}"
        node.registered.set()
        return
    interval = interval_override or float(reply.get("heartbeat_interval_s") or 2)
    node.registered.set()

    async def reader():
        try:
            while True:
                await node.ws.recv()
                node.messages += 1
        except WSClosed as e:
            if not stop.is_set():
                node.error = f"closed by the server: {e}"

    rt = asyncio.ensure_future(reader())
    try:
        # Spread the heartbeats over the interval instead of sending all at once.
        await asyncio.wait_for(stop.wait(), timeout=interval * (hash(node.id) % 1000) / 1000)
    except asyncio.TimeoutError:
        pass
    while not stop.is_set() and node.error is None:
        try:
            await node.ws.send_text('{"type":"heartbeat"}')
            node.heartbeats += 1
        except Exception as e:
            node.error = f"heartbeat: {e}"
            break
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except asyncio.TimeoutError:
            pass
    rt.cancel()
    node.ws.close()


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


async def main_async(args):
    u = urllib.parse.urlparse(args.url)
    token = ""
    if args.token_file and os.path.exists(args.token_file):
        token = open(args.token_file).read().strip()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    if args.stdin_eof:
        def on_stdin():
            if not sys.stdin.buffer.read1(4096):
                loop.remove_reader(sys.stdin.fileno())
                stop.set()
        loop.add_reader(sys.stdin.fileno(), on_stdin)
    sem = asyncio.Semaphore(args.concurrency)
    nodes = [Node(i, args.prefix, args.cpus, args.memory_mb) for i in range(args.nodes)]
    t0 = time.time()
    tasks = [asyncio.ensure_future(run_node(n, u.hostname, u.port, token, sem, stop,
                                            args.heartbeat_s)) for n in nodes]
    for n in nodes:
        await n.registered.wait()
    bad = [n for n in nodes if n.error]
    print(f"registered {len(nodes) - len(bad)} of {len(nodes)} in {time.time() - t0:.1f} s"
          + (f"; first error: {bad[0].id}: {bad[0].error}" if bad else ""), flush=True)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=args.report_s)
        except asyncio.TimeoutError:
            pass
        alive = sum(1 for n in nodes if n.error is None)
        hb = sum(n.heartbeats for n in nodes)
        first = next((n for n in nodes if n.error), None)
        print(f"status: {alive} connected, {hb} heartbeats sent"
              + (f"; {first.id}: {first.error}" if first else ""), flush=True)
    await asyncio.gather(*tasks, return_exceptions=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="ws://127.0.0.1:PORT (the server's --ws-port)")
    ap.add_argument("--token-file", help="<server data dir>/cluster.token")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--prefix", default="sim")
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--memory-mb", type=int, default=32768)
    ap.add_argument("--concurrency", type=int, default=64, help="handshakes in flight")
    ap.add_argument("--heartbeat-s", type=float, default=0,
                    help="heartbeat interval (0: what the server asks for)")
    ap.add_argument("--report-s", type=float, default=10)
    ap.add_argument("--stdin-eof", action="store_true", help="stop when stdin closes")
    args = ap.parse_args()
    host = urllib.parse.urlparse(args.url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("memory_loadgen.py: only addresses on this machine (127.0.0.1)")
    soft, _ = raise_nofile(args.nodes + 256)
    if soft < args.nodes + 64:
        sys.exit(f"memory_loadgen.py: ulimit -n is {soft}, too low for {args.nodes} connections")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
