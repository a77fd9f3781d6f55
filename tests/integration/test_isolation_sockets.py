"""Issue 22, connection-level limits: one client or job cannot take the sockets, descriptors or
memory that others need. Each test attacks a real server, agent or SDK rendezvous:
  * finding 4: a job floods its agent's report socket with connections that never say hello;
    another job on the same agent still starts and reports, and the agent's descriptors stay
    bounded;
  * finding 7: unauthenticated 16 MiB upload bodies are answered 401 before they are read, so
    the server's memory does not grow with them;
  * finding 8: slow request heads from many loopback addresses fill the connection limit; they
    are cut at the request-head deadline and a normal client is served;
  * finding 9: silent strangers on a job's rendezvous port do not keep its ranks from meeting.
"""
import json
import os
import select
import socket
import subprocess
import textwrap
import threading
import time

import pytest

import harness

PY = "/usr/bin/python3"


wait_for = harness.wait_for


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def read_status_line(s, timeout=60):
    """The status code of the HTTP reply on socket s (what arrived before the peer closed)."""
    s.settimeout(timeout)
    got = b""
    while b"\r\n" not in got:
        try:
            chunk = s.recv(4096)
        except ConnectionResetError:
            break
        if not chunk:
            break
        got += chunk
    parts = got.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


# ---- finding 7: bodies are not read before the caller is authenticated -----------------------

BODY = 16 * 1024 * 1024


def send_unauthenticated_body(port, method, path, headers, results, i):
    """Sends a 16 MiB body without a token, as fast as the server reads it, and stores the
    status of the reply (None when none came)."""
    s = socket.create_connection(("127.0.0.1", port))
    try:
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {BODY}\r\n"
                "Content-Type: application/octet-stream\r\n" +
                "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n")
        s.sendall(head.encode())
        chunk = b"\0" * 262144
        sent = 0
        s.setblocking(False)
        while sent < BODY:
            readable, writable, _ = select.select([s], [s], [], 60)
            if readable or not writable:
                break  # the reply (or the close) came before the body was sent
            try:
                sent += s.send(chunk[:BODY - sent])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                break  # refused and closed
        s.setblocking(True)
        results[i] = read_status_line(s)
    finally:
        s.close()


def test_unauthenticated_upload_bodies_are_refused_before_they_are_read(server):
    pid = server.proc.pid
    before = status_kib(pid, "VmRSS")
    sha = "ab" * 32
    targets = [("PUT", f"/api/v1/code/{sha}?offset=0", {"X-Content-SHA256": sha}),
               ("PUT", "/api/v1/agent/checkpoints/1/1/1/part?offset=0",
                {"X-Chunk-CRC32C": "00000000", "X-Trainyard-Node": "nobody"}),
               ("POST", "/api/v1/jobs", {"Authorization": "Bearer ty_not_a_token"})]
    n = 48
    results = [None] * n
    threads = [threading.Thread(target=send_unauthenticated_body,
                                args=(server.port, *targets[i % len(targets)], results, i))
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peak = status_kib(pid, "VmHWM")
    assert results == [401] * n, results
    growth_mib = (peak - before) / 1024
    # 48 bodies of 16 MiB are 768 MiB: buffering them all is what the bound rules out.
    assert growth_mib < 100, f"the server's RSS grew by {growth_mib:.0f} MiB"
    # The server is fine, and an authenticated caller still uploads.
    data = b"package bytes"
    import hashlib
    sha = hashlib.sha256(data).hexdigest()
    r = server.request("PUT", f"/api/v1/code/{sha}?offset=0", body=data,
                       headers={"X-Content-SHA256": sha, "Content-Type": "application/octet-stream"})
    assert r.status == 200, r


# ---- finding 8: slow request heads ------------------------------------------------------------

def test_slow_request_heads_are_cut_and_a_normal_client_is_served(server_factory):
    server = server_factory(extra_args=("--http-head-timeout-s", "3", "--http-max-connections",
                                        "100", "--http-max-connections-per-ip", "8"))
    # 20 addresses with 6 connections each: more than the server's 100, none over 8 per address.
    slow = []
    for a in range(2, 22):
        for _ in range(6):
            s = socket.socket()
            s.bind((f"127.0.0.{a}", 0))
            s.settimeout(10)
            s.connect(("127.0.0.1", server.port))
            s.setblocking(False)
            slow.append(s)
    stop = threading.Event()
    closed = set()

    def trickle():
        head = b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 4096
        pos = 0
        while not stop.is_set():
            for s in slow:
                if s in closed:
                    continue
                try:
                    if s.recv(4096) == b"":
                        closed.add(s)
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    closed.add(s)
                    continue
                try:
                    s.send(head[pos:pos + 1])
                except BlockingIOError:
                    pass
                except OSError:
                    closed.add(s)
            pos = (pos + 1) % len(head)
            stop.wait(1)

    t = threading.Thread(target=trickle)
    t.start()
    try:
        # The slow heads hold every connection slot; the normal client's connection waits in the
        # listen backlog until the head deadline frees slots.
        r = harness.http("GET", server.url + "/api/v1/jobs", token=server.admin_token,
                         timeout=120)
        assert r.status == 200, r
        wait_for(lambda: len(closed) == len(slow), timeout=120,
                 what="every slow connection closed")
    finally:
        stop.set()
        t.join()
        for s in slow:
            s.close()
    assert "--http-head-timeout-s" in server.log_text()


# ---- finding 9: silent strangers on the rendezvous port ---------------------------------------

def try_connect(port):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        return s
    except OSError:
        s.close()
        return None


def test_silent_strangers_on_the_rendezvous_port_do_not_fail_the_job():
    bench = os.path.join(harness.BUILD_DIR, "bench", "allreduce_bench")
    if not os.path.exists(bench):
        pytest.skip("allreduce_bench not built")
    port = harness.free_port()
    base = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                TRAINYARD_JOB_ID="rv-silent", TRAINYARD_ATTEMPT="1", TRAINYARD_BACKEND="native",
                TRAINYARD_TRANSPORT="tcp", TRAINYARD_RENDEZVOUS_SECRET="b" * 64,
                TRAINYARD_COLLECTIVE_TIMEOUT_S="30")
    args = [bench, "--min", "64", "--max", "64", "--seconds", "0.05"]
    rank0 = subprocess.Popen(args, env=dict(base, RANK="0"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    strangers = [wait_for(lambda: try_connect(port), what="rank 0 listening")]
    strangers[0].sendall(b"TYRH\0\0")  # half a HELLO, then silence
    # More silent connections than rank 0 keeps waiting at once (those its listen backlog
    # refuses are left out).
    for _ in range(80):
        s = try_connect(port)
        if s:
            strangers.append(s)
    rank1 = subprocess.Popen(args, env=dict(base, RANK="1"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    out0, _ = rank0.communicate(timeout=120)
    out1, _ = rank1.communicate(timeout=120)
    for s in strangers:
        s.close()
    assert rank0.returncode == 0 and rank1.returncode == 0, (out0, out1)


# ---- finding 4: the report socket ----------------------------------------------------------------

FLOODER = textwrap.dedent("""
    import os, resource, socket, time
    want = 3000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, want + 200), hard))
    path = os.environ["TRAINYARD_REPORT_SOCKET"]
    held, announced = [], False
    while True:
        alive = []
        for s in held:  # replace what the agent closed
            try:
                if s.recv(1, socket.MSG_DONTWAIT) == b"":
                    s.close()
                    continue
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            alive.append(s)
        held = alive
        for _ in range(200):
            if len(held) >= want:
                break
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(0.2)
            try:
                s.connect(path)
            except OSError:
                s.close()
                break
            held.append(s)
        if not announced:
            print("flooding", flush=True)
            announced = True
        time.sleep(0.1)
""")

REPORTER = textwrap.dedent("""
    import trainyard
    trainyard.report({"loss": 1.25})
    print("reported", flush=True)
""")


def agent_pid(agent):
    """The trainyard-agent process (the harness may start it under a wrapper)."""
    pids = [agent.proc.pid]
    while pids:
        pid = pids.pop()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"trainyard-agent" in f.read().split(b"\0")[0]:
                return pid
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    raise AssertionError("no trainyard-agent process")


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_report_socket_flood_leaves_the_agent_serving_other_jobs(server, agent_factory):
    agent = agent_factory(cpus=2, env={"TRAINYARD_AGENT_RUN_AS": "auto"},
                          extra_args=("--report-hello-timeout-s", "2"))
    pid = agent_pid(agent)
    base = fd_count(pid)
    # A connection that never says hello is closed (--report-hello-timeout-s).
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(os.path.join(agent.data_dir, "report.sock"))
    silent.settimeout(120)
    assert silent.recv(1) == b"", "the agent kept a connection that never said hello"
    silent.close()
    flood = server.submit({"name": "flood", "entrypoint": [PY, "-c", FLOODER],
                           "working_dir": "/tmp"})["id"]
    server.wait_job(flood, {"RUNNING"})
    log = os.path.join(agent.data_dir, "logs", str(flood), "1", "rank-0.log")
    wait_for(lambda: os.path.exists(log) and "flooding" in open(log).read(), what="the flood")
    most = fd_count(pid)
    victim = server.submit({"name": "victim", "entrypoint": [PY, "-c", REPORTER],
                            "working_dir": "/tmp"})["id"]
    deadline = time.time() + 120
    job = None
    while time.time() < deadline:
        most = max(most, fd_count(pid))
        job = server.request("GET", f"/api/v1/jobs/{victim}").json
        if job["status"] in ("SUCCEEDED", "FAILED", "STOPPED"):
            break
        time.sleep(0.2)
    for _ in range(20):  # the flood goes on: the count stays bounded
        most = max(most, fd_count(pid))
        time.sleep(0.1)
    flood_log = open(log).read()
    server.request("POST", f"/api/v1/jobs/{flood}/stop")
    server.wait_job(flood, {"STOPPED", "FAILED"})
    assert job and job["status"] == "SUCCEEDED", (job, agent.log_text()[-4000:])
    pts = server.request("GET", f"/api/v1/jobs/{victim}/metrics?name=loss").json
    assert "1.25" in json.dumps(pts), pts
    # The flooder's uid holds at most --report-max-conns-per-uid (64) connections.
    assert most < base + 64 + 64, (base, most, flood_log[-2000:])
    assert "report-max-conns-per-uid" in agent.log_text()
