"""Issue 14, findings 5, 6 and 10: limits against exhaustion, tried with real processes.
  * HTTP: 500 idle connections from one address while a client from another address still gets
    answers; connections past the per-address cap are closed; an exhausted database pool answers
    503 with Retry-After instead of hanging.
  * websocket hub: 500 idle connections while a real agent registers and a real job runs; an
    oversized message before authentication closes the connection.
  * quotas: the priority ceiling for non-admins.
"""
import os
import socket
import struct
import time

import harness
from wsclient import OP_CLOSE, OP_PING, OP_PONG, Closed, WebSocket

N_IDLE = 500
PY = "/usr/bin/python3"


def wait_for(pred, timeout=30, what="condition"):
    return harness.wait_for(pred, timeout, what)


def open_idle(port, n, first_bytes=b""):
    """Opens n TCP connections from 127.0.0.1 that send `first_bytes` (part of a request) and
    then nothing. Connections refused outright are not returned."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            if first_bytes:
                s.sendall(first_bytes)
        except OSError:
            s.close()
            continue
        socks.append(s)
    return socks


def closed_by_peer(s):
    """True when the server has closed (or reset) the connection."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def get_from(addr, port, path):
    """GET over a connection whose source address is `addr` (another loopback address)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(addr, 0))
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    return data.decode("latin-1")


# ---- finding 6: HTTP -------------------------------------------------------------------------

def test_idle_http_connections_are_capped_and_other_clients_answered(server_factory):
    srv = server_factory(extra_args=("--http-max-connections-per-ip", "32",
                                     "--http-max-connections", "200"))
    socks = open_idle(srv.port, N_IDLE, b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")
    try:
        # Past the per-address cap the server closes what it accepted; only the cap stays open.
        def settled():
            return sum(1 for s in socks if not closed_by_peer(s)) <= 32
        wait_for(settled, 30, "idle connections past the per-address cap closed")
        # A client from another address is still answered, with the API working.
        reply = get_from("127.0.0.2", srv.port, "/api/v1/health")
        assert reply.startswith("HTTP/1.1 200"), reply[:200]
    finally:
        for s in socks:
            s.close()


def test_silent_http_connection_closed_after_idle_timeout(server_factory):
    srv = server_factory(extra_args=("--http-idle-timeout-s", "1"))
    socks = open_idle(srv.port, 1, b"GET /api/v1/health HTTP/1.1\r\n")
    assert socks
    s = socks[0]
    s.settimeout(30)
    try:
        assert s.recv(1) == b"", "a silent connection must be closed by the server"
    except ConnectionResetError:
        pass
    finally:
        s.close()


def test_exhausted_database_pool_answers_503_with_retry_after(database):
    # A pool of 2: the control thread and the stream listener hold both for good, so no request
    # can ever get a connection. Before the bounded wait, requests hung for ever.
    srv = harness.Server(database_url=database,
                         extra_args=("--db-pool-size", "2", "--db-acquire-timeout-ms", "300"))
    srv.start(wait=False)
    try:
        def answered():
            try:
                return harness.http("GET", srv.url + "/api/v1/health", timeout=2)
            except OSError:
                return None
        r = wait_for(answered, 30, "the server answering /health")
        assert r.status == 503, r
        assert r.headers.get("Retry-After") == "1", r.headers
        token = open(srv.data_dir + "/admin.token").read().strip()
        r = harness.http("GET", srv.url + "/api/v1/jobs", token=token, timeout=10)
        assert r.status == 503, r
        assert r.json["code"] == "database-unavailable"
        assert r.headers.get("Retry-After") == "1", r.headers
    finally:
        assert srv.stop() == 0, srv.log_text()


# ---- finding 5: websocket hub ----------------------------------------------------------------

def open_idle_ws(url, n, subprotocol):
    socks = []
    for _ in range(n):
        try:
            socks.append(WebSocket(url, subprotocol=subprotocol, timeout=5))
        except Exception:  # refused: over a cap
            pass
    return socks


def test_idle_websockets_capped_while_agent_registers_and_job_runs(server_factory, agent_factory):
    srv = server_factory(extra_args=("--ws-max-preauth-per-ip", "32", "--ws-auth-timeout-s", "3"))
    idle = open_idle_ws(srv.ws_url, N_IDLE // 2, "trainyard-agent.v1")
    idle += open_idle_ws(srv.ws_url + "/stream", N_IDLE // 2, "trainyard-stream.v1")
    try:
        # At most the per-address cap was accepted, and those are closed after the deadline.
        assert len(idle) <= 32, len(idle)
        wait_for(lambda: all(closed_by_peer(w.sock) for w in idle), 60,
                 "silent websocket peers closed")
        # Another round of idle peers while a real agent registers and a job runs.
        idle += open_idle_ws(srv.ws_url, N_IDLE, "trainyard-agent.v1")
        agent = agent_factory(srv=srv)
        agent.wait_node(("ALIVE",), timeout=60)
        job = srv.submit({"name": "under-siege", "entrypoint": [PY, "-c", "print('ok')"],
                          "working_dir": "/tmp"})["id"]
        done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", done
    finally:
        for w in idle:
            w.sock.close()


def send_fragment(ws, payload):
    """Sends a masked text frame without FIN: the message is not complete."""
    mask = os.urandom(4)
    header = bytes([0x01, 0x80 | 126]) + struct.pack("!H", len(payload))
    ws.sock.sendall(header + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(payload)))


def test_oversized_message_before_authentication_closes_connection(server_factory):
    srv = server_factory(extra_args=("--ws-preauth-max-bytes", "4096",
                                     "--ws-auth-timeout-s", "600"))
    for url, proto in ((srv.ws_url, "trainyard-agent.v1"),
                       (srv.ws_url + "/stream", "trainyard-stream.v1")):
        ws = WebSocket(url, subprotocol=proto)
        # The first 20 KiB fragment of a message (no FIN): under the old 16 MiB (agents) / 64 KiB
        # (streams) limits it was buffered, waiting for the rest, and the connection kept open.
        send_fragment(ws, ('{"type": "register", "pad": "' + "x" * 20000).encode())
        wait_for(lambda: closed_by_peer(ws.sock), 30, "oversized pre-auth message refused")
        ws.sock.close()


# ---- finding 10: quotas ----------------------------------------------------------------------

def test_priority_ceiling_for_non_admins(server_factory):
    srv = server_factory(extra_args=("--max-priority-user", "50"))
    user = srv.create_token("prio-user", "user")
    spec = {"name": "greedy", "entrypoint": [PY, "-c", "pass"], "working_dir": "/tmp"}
    r = srv.request("POST", "/api/v1/jobs", dict(spec, priority=1000), token=user)
    assert r.status == 400, r
    assert r.json["errors"][0]["field"] == "priority", r.json
    assert srv.request("POST", "/api/v1/jobs", dict(spec, priority=50), token=user).status == 201
    # Admins may still go up to the spec's bound.
    assert srv.request("POST", "/api/v1/jobs", dict(spec, priority=1000)).status == 201


REPORT_FLOOD = """
import trainyard
for step in range(6):
    trainyard.report({**{f"m{i:02d}": float(step) for i in range(20)}, "step": step})
print("reported")
"""


def test_report_caps_per_worker_and_per_report(server_factory, agent_factory, pg):
    srv = server_factory(extra_args=("--max-reports-per-worker", "3",
                                     "--max-metrics-per-report", "10"))
    agent = agent_factory(srv=srv)
    job = srv.submit({"name": "flood", "entrypoint": [PY, "-c", REPORT_FLOOD],
                      "working_dir": "/tmp"})["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(job, 0))
    # Every report is acked (the dropped ones too): the agent's spool empties.
    spool = os.path.join(agent.data_dir, "spool")
    wait_for(lambda: os.listdir(spool) == [], 30, "spool emptied")
    points = srv.request("GET", f"/api/v1/jobs/{job}/metrics").json["metrics"]
    names = {p["name"] for p in points}
    assert len(names) == 10, names
    steps = {p["step"] for p in points}
    assert steps == {0, 1, 2}, steps
    # the values past the cap are not stored either (nor counted in the job's report bytes)
    db = srv.args[srv.args.index("--database-url") + 1].split("dbname=")[1].split()[0]
    assert pg.psql("SELECT string_agg(DISTINCT (SELECT count(*) FROM jsonb_object_keys(metrics))"
                   f"::text, ',') FROM reports WHERE job_id = {job}", db=db) == "10"
    # GET /metrics reads at most --max-metric-rows rows: beyond, it asks to narrow the query.
    srv2 = server_factory(database_url=srv.args[srv.args.index("--database-url") + 1],
                          extra_args=("--max-metric-rows", "25"))
    r = srv2.request("GET", f"/api/v1/jobs/{job}/metrics", token=srv.admin_token)
    assert r.status == 400 and "max-metric-rows" in r.json["detail"], r
    r = srv2.request("GET", f"/api/v1/jobs/{job}/metrics?name=m00", token=srv.admin_token)
    assert r.status == 200 and len(r.json["metrics"]) == 3, r


def test_running_workers_quota_per_user(server_factory, agent_factory, tmp_path):
    srv = server_factory(extra_args=("--max-workers-per-user", "1"))
    agent_factory(srv=srv, cpus=4)
    user = srv.create_token("quota-user", "user")
    gate = tmp_path / "gate"
    os.chmod(tmp_path, 0o777)
    wait_gate = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.1)\n"
    spec = {"entrypoint": [PY, "-c", wait_gate], "working_dir": "/tmp",
            "scaling_config": {"resources_per_worker": {"CPU": 1}}}
    first = srv.submit(dict(spec, name="first"), token=user)["id"]
    srv.wait_job(first, {"RUNNING"})
    second = srv.submit(dict(spec, name="second"), token=user)["id"]
    # The second waits for the quota, although the node has room; another user's job runs.
    other = srv.submit(dict(spec, name="other"))["id"]
    srv.wait_job(other, {"RUNNING"})
    job = wait_for(lambda: (lambda j: j if "quota" in (j.get("status_message") or "") else None)(
        srv.request("GET", f"/api/v1/jobs/{second}").json), 30, "quota message")
    assert job["status"] == "PENDING", job
    gate.write_text("go")
    for j in (first, second, other):
        assert srv.wait_job(j, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"


CHECKPOINTING = """
import os, shutil, tempfile
import trainyard
d = tempfile.mkdtemp(prefix="ty-ck-")
with open(os.path.join(d, "weights.bin"), "wb") as f:
    f.write(b"x" * 1000)
trainyard.report({"loss": 1.0, "step": 1}, checkpoint=d)
shutil.rmtree(d)
"""


def test_deleting_a_job_removes_its_staging_on_the_agents(server_factory, agent_factory):
    srv = server_factory()
    agent = agent_factory(srv=srv)
    job = srv.submit({"name": "staged", "entrypoint": [PY, "-c", CHECKPOINTING],
                      "working_dir": "/tmp"})["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(job, 0))
    staging = os.path.join(agent.data_dir, "checkpoints", str(job))
    wait_for(lambda: os.path.isdir(staging), 30, "checkpoint staged on the agent")
    keep = srv.submit({"name": "kept", "entrypoint": [PY, "-c", CHECKPOINTING],
                       "working_dir": "/tmp"})["id"]
    assert srv.wait_job(keep, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    kept = os.path.join(agent.data_dir, "checkpoints", str(keep))
    wait_for(lambda: os.path.isdir(kept), 30, "second checkpoint staged")
    assert srv.request("DELETE", f"/api/v1/jobs/{job}").status == 204
    wait_for(lambda: not os.path.exists(staging), 30, "staging of the deleted job removed")
    assert os.path.isdir(kept), "another job's staging must stay"


def test_a_job_deleted_while_its_agent_is_away_is_forgotten_when_it_returns(server_factory,
                                                                          agent_factory):
    srv = server_factory()
    agent = agent_factory(srv=srv)
    job = srv.submit({"name": "staged-away", "entrypoint": [PY, "-c", CHECKPOINTING],
                      "working_dir": "/tmp"})["id"]
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    staging = os.path.join(agent.data_dir, "checkpoints", str(job))
    wait_for(lambda: os.path.isdir(staging), 30, "checkpoint staged on the agent")
    assert agent.stop() == 0
    assert srv.request("DELETE", f"/api/v1/jobs/{job}").status == 204
    assert os.path.isdir(staging), "the agent is away: nothing removed yet"
    agent.start()
    wait_for(lambda: not os.path.exists(staging), 30, "staging removed once the agent is back")
    assert "told to forget 1 jobs" in srv.log_text()


# ---- finding 5: silent peers ----------------------------------------------------------------


def test_a_silent_peer_is_pinged_then_closed_and_one_that_answers_stays(server_factory):
    """--ws-ping-s 2: a /stream subscriber that never answers pings is pinged, then closed after
    three times that; one that answers them is still served afterwards."""
    srv = server_factory(extra_args=("--ws-ping-s", "2"))

    def authenticated():
        ws = WebSocket(srv.ws_url + "/stream", subprotocol="trainyard-stream.v1")
        ws.send_json({"type": "auth", "token": srv.admin_token})
        assert ws.recv_json()["type"] == "welcome"
        return ws

    silent = authenticated()
    pings, closed = 0, False
    silent.sock.settimeout(30)
    try:
        while True:
            _, opcode, _ = silent._recv_frame()
            if opcode == OP_PING:
                pings += 1
            if opcode == OP_CLOSE:
                closed = True
                break
    except Closed:  # the TCP connection ended (lws hangs up without a close frame)
        closed = True
    silent.sock.close()
    assert pings >= 1 and closed, (pings, closed)
    # One that answers every ping is still served after more than as long.
    polite = authenticated()
    answered, deadline = 0, time.time() + 8
    polite.sock.settimeout(0.5)
    while time.time() < deadline:
        try:
            _, opcode, payload = polite._recv_frame()
        except socket.timeout:
            continue
        if opcode == OP_PING:
            polite._send_frame(OP_PONG, payload)
            answered += 1
    assert answered >= 2, answered
    polite.send_json({"type": "subscribe", "cluster": True, "after": 0})
    assert polite.recv_json()["type"] == "subscribed"
    polite.close()


def test_an_agent_that_does_not_read_is_disconnected_not_buffered(server_factory):
    """--ws-queue-max 16: an agent that keeps sending reports but never reads their acks (a tiny
    receive buffer, never drained) is disconnected once 16 messages wait for it, instead of the
    server holding an ever longer queue; the server goes on serving."""
    from test_metrics import FakeAgent, running_job

    class DeafAgent(FakeAgent):
        def connect(self, workers=()):
            super().connect(workers)
            # Re-register over a connection whose receive buffer is 2 KiB and never read.
            self.ws.close()
            self.ws = WebSocket(self.server.ws_url + "/agent", rcvbuf=2048)
            self.ws.send_json({"type": "register", "credential": self.credential,
                               "node": {"id": self.node_id, "hostname": self.node_id,
                                        "address": "127.0.0.1",
                                        "resources": {"CPU": self.cpus, "memory_mb": 8192,
                                                      "GPU": []},
                                        "port_range": [29500, 29999]}})
            assert self.ws.recv_json()["type"] == "registered"
            return self

    srv = server_factory(extra_args=("--ws-queue-max", "16"))
    node = DeafAgent(srv)
    job = running_job(srv, node)
    closed = False
    try:
        for k in range(1, 20001):
            node.send_event(node.report_msg(job, k % 2, (k + 1) // 2, {"loss": 1.0 / k}))
            if k % 500 == 0 and "does not read" in srv.log_text():
                break
    except OSError:
        closed = True
    wait_for(lambda: "does not read" in srv.log_text(), 60, "the deaf agent disconnected")
    if not closed:
        node.ws.sock.settimeout(30)
        try:
            while node.ws.sock.recv(65536):
                pass
        except OSError:
            pass
    assert srv.request("GET", "/api/v1/health").status == 200
    node.ws.sock.close()
