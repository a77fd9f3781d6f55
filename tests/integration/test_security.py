"""Issue 14: one user's job cannot touch another's, or the cluster. Each test tries an attack with
real processes (server, agents, workers, a rogue client) and checks that it is refused:
  * a job that goes after the admin token, the cluster token, another job's log, temporary
    files and processes (workers under a uid of their own: --run-as auto, the agent is root);
  * the cluster token on an agent's command line;
  * an impostor agent re-registering a live node id, and a worker_exited forged by another node;
  * a foreign client on the report socket claiming a running worker;
  * a rendezvous intruder claiming a rank of a native job;
  * resuming from another user's checkpoint, secret_env values in the API, log file modes;
  * GET /jobs?status= with many entries.
"""
import json
import os
import socket
import stat
import struct
import subprocess
import textwrap
import time

import pytest

import harness
from wsclient import WebSocket

PY = "/usr/bin/python3"
SERVER_ARGS = ("--heartbeat-timeout-s", "120")


def cluster_token(server):
    with open(os.path.join(server.data_dir, "cluster.token")) as f:
        return f.read().strip()


def isolated_agent(agent_factory, **kw):
    """An agent whose workers run under uids of their own (the default for a root agent)."""
    return agent_factory(env={"TRAINYARD_AGENT_RUN_AS": "auto"}, **kw)


def log_path(agent, job, rank=0, attempt=1):
    return os.path.join(agent.data_dir, "logs", str(job), str(attempt), f"rank-{rank}.log")


def wait_for(pred, timeout=30, what="condition"):
    return harness.wait_for(pred, timeout, what)


# ---- finding 1: workers run unprivileged, with a scrubbed environment ------------------------

VICTIM = textwrap.dedent("""
    import os, time
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "victim-secret"), "w") as f:
        f.write("victim data")
    print("victim started", flush=True)
    time.sleep(600)
""")

ATTACKER = textwrap.dedent("""
    import json, os, signal, sys
    targets = json.loads(sys.argv[1])
    out = {}
    def attempt(name, fn):
        try:
            fn()
            out[name] = "ALLOWED"
        except Exception as e:
            out[name] = type(e).__name__
    def read(p):
        with open(p) as f:
            f.read()
    attempt("admin_token", lambda: read(targets["admin_token"]))
    attempt("cluster_token_file", lambda: read(targets["cluster_token"]))
    attempt("victim_log", lambda: read(targets["victim_log"]))
    attempt("agent_data_dir", lambda: os.listdir(targets["agent_data"]))
    attempt("victim_tmp", lambda: read(targets["victim_tmp"]))
    attempt("kill_victim", lambda: os.kill(targets["victim_pid"], signal.SIGKILL))
    leaked = [k for k in os.environ if k.startswith("TRAINYARD_CLUSTER") or
              os.environ[k] == targets["cluster_token_value"]]
    out["env_leaks"] = leaked
    out["uid"] = os.getuid()
    print("RESULT " + json.dumps(out), flush=True)
""")


def test_a_job_cannot_reach_the_cluster_or_another_job(server_factory, agent_factory):
    server = server_factory(extra_args=SERVER_ARGS)
    token = cluster_token(server)
    # The cluster token also sits in the agent's environment: it must not reach the workers.
    agent = agent_factory(srv=server, cpus=2, env={"TRAINYARD_AGENT_RUN_AS": "auto",
                                                   "TRAINYARD_CLUSTER_TOKEN": token})
    victim = server.submit({"name": "victim", "entrypoint": [PY, "-c", VICTIM],
                            "working_dir": "/tmp"})["id"]
    server.wait_job(victim, {"RUNNING"})
    wait_for(lambda: "victim started" in open(log_path(agent, victim)).read(), what="victim")
    [w] = server.request("GET", f"/api/v1/jobs/{victim}/workers").json["workers"]
    tmp = proc_env(w["pid"])["TMPDIR"]  # job ids repeat across the test servers run in parallel
    targets = {
        "admin_token": os.path.join(server.data_dir, "admin.token"),
        "cluster_token": os.path.join(server.data_dir, "cluster.token"),
        "cluster_token_value": token,
        "victim_log": log_path(agent, victim),
        "agent_data": agent.data_dir,
        "victim_tmp": os.path.join(tmp, "victim-secret"),
        "victim_pid": w["pid"],
    }
    attacker = server.submit({"name": "attacker", "working_dir": "/tmp",
                              "entrypoint": [PY, "-c", ATTACKER, json.dumps(targets)]})["id"]
    done = server.wait_job(attacker, {"SUCCEEDED", "FAILED"})
    text = open(log_path(agent, attacker)).read()
    assert done["status"] == "SUCCEEDED", text
    [line] = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    got = json.loads(line[len("RESULT "):])
    assert got["uid"] != 0 and got["uid"] != os.getuid(), got
    for k in ("admin_token", "cluster_token_file", "victim_log", "agent_data_dir", "victim_tmp",
              "kill_victim"):
        assert got[k] != "ALLOWED", got
    assert got["env_leaks"] == [], got
    assert server.request("GET", f"/api/v1/jobs/{victim}").json["status"] == "RUNNING"
    # Private files: the log is the agent's alone, the temporary directory the job's alone.
    assert stat.S_IMODE(os.stat(log_path(agent, victim)).st_mode) == 0o600
    assert tmp.startswith(f"/tmp/trainyard-{victim}.1.0-")
    st = os.stat(tmp)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.stat(f"/proc/{w['pid']}").st_uid
    server.request("POST", f"/api/v1/jobs/{victim}/stop")
    server.wait_job(victim, {"STOPPED"})
    # Once the job is gone, nothing of it stays behind.
    wait_for(lambda: not os.path.exists(tmp), what="tmp dir removed")


def proc_env(pid):
    """The environment of process `pid`, from /proc."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
    return {k.decode(): v.decode() for k, v in pairs}


def test_an_isolated_job_resumes_and_reports_checkpoints(server, agent_factory):
    """Under uids of their own workers still report checkpoints and resume from them."""
    from test_resume import READER, WRITER, seen
    from test_checkpoints import wait_checkpoints
    agent = isolated_agent(agent_factory, cpus=2)

    def run(script, name, **spec):
        work = harness.make_tmpdir("ty-iso-")
        os.chmod(work, 0o1777)  # the workers write their findings here under their own uid
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(script)
        job = server.submit({"name": name, "entrypoint": [PY, "train.py"], "working_dir": work,
                             "scaling_config": {"num_workers": 2}, **spec})["id"]
        done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", (done, agent.worker_log(job, 0))
        return job, work

    first, _ = run(WRITER, "iso-writer")
    [ck] = wait_checkpoints(server, first, 1)
    _, work = run(READER, "iso-reader", resume_from_checkpoint=ck["id"])
    assert seen(work, 1)["files"]["rank-1.txt"] == b"weights of rank 1".hex()


# ---- finding 2: no secret on a command line --------------------------------------------------

def test_the_cluster_token_is_not_on_the_agents_command_line(server, agent_factory):
    agent = agent_factory()
    with open(f"/proc/{agent.proc.pid}/cmdline", "rb") as f:
        argv = f.read().decode()
    assert cluster_token(server) not in argv
    assert "--token-file" in argv


# ---- finding 3: node credentials, events only from the owning node ---------------------------

def register_msg(node_id, token, credential=None):
    return {"type": "register", "token": token, "credential": credential, "workers": [],
            "node": {"id": node_id, "hostname": node_id, "address": "127.0.0.1",
                     "resources": {"CPU": 4, "memory_mb": 8192, "GPU": []}, "gpu_type": None,
                     "labels": {}, "version": "test", "port_range": [29500, 29999]}}


def test_an_impostor_with_the_cluster_token_cannot_take_a_live_node(server_factory,
                                                                    agent_factory):
    server = server_factory(extra_args=SERVER_ARGS)
    agent = agent_factory(srv=server)
    node = agent.node_id
    cred = os.path.join(agent.data_dir, "node.credential")
    assert stat.S_IMODE(os.stat(cred).st_mode) == 0o600
    with WebSocket(server.ws_url + "/agent") as ws:
        ws.send_json(register_msg(node, cluster_token(server)))
        reply = ws.wait_for(lambda m: m["type"] in ("registered", "error"))
        assert reply["type"] == "error", reply
        assert "credential" in reply["message"]
    # The real agent keeps the node: a job still runs there.
    job = server.submit({"name": "still-mine", "entrypoint": "true"})["id"]
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    # ... and after a restart it proves itself with its credential.
    agent.stop()
    agent.start()
    job = server.submit({"name": "after-restart", "entrypoint": "true"})["id"]
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"


def test_a_worker_event_from_another_node_changes_nothing(server_factory, agent_factory):
    server = server_factory(extra_args=SERVER_ARGS)
    agent_factory(srv=server, cpus=1)
    job = server.submit({"name": "long", "entrypoint": "sleep 600"})["id"]
    server.wait_job(job, {"RUNNING"})
    with WebSocket(server.ws_url + "/agent") as ws:
        ws.send_json(register_msg("rogue-node", cluster_token(server)))
        reply = ws.wait_for(lambda m: m["type"] in ("registered", "error"))
        assert reply["type"] == "registered", reply
        ws.send_json({"type": "worker_exited", "seq": 1, "job_id": str(job), "attempt": 1,
                      "rank": 0, "exit_code": 0, "signal": None, "error": None})
        ws.wait_for(lambda m: m["type"] == "ack" and m["seq"] == 1)
    assert server.request("GET", f"/api/v1/jobs/{job}").json["status"] == "RUNNING"
    [w] = server.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
    assert w["exit_code"] is None, w
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    server.wait_job(job, {"STOPPED"})


def test_register_limits_node_ids_and_addresses(server):
    for bad in ({"id": "a" * 129}, {"id": "has space"}, {"address": "x" * 300}):
        msg = register_msg("ok-node", cluster_token(server))
        msg["node"].update(bad)
        with WebSocket(server.ws_url + "/agent") as ws:
            ws.send_json(msg)
            reply = ws.wait_for(lambda m: m["type"] in ("registered", "error"))
            assert reply["type"] == "error", (bad, reply)


# ---- finding 4: the report socket --------------------------------------------------------------

def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def read_frame(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (n,) = struct.unpack(">I", head)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(body)


REPORTER = textwrap.dedent("""
    import time, trainyard
    trainyard.report({"loss": 1.0})
    print("reported", flush=True)
    time.sleep(600)
""")


def test_a_foreign_report_client_cannot_speak_for_a_worker(server_factory, agent_factory):
    server = server_factory(extra_args=SERVER_ARGS)
    agent = agent_factory(srv=server, cpus=1)
    job = server.submit({"name": "reporter", "entrypoint": [PY, "-c", REPORTER],
                         "working_dir": "/tmp"})["id"]
    server.wait_job(job, {"RUNNING"})
    wait_for(lambda: "reported" in open(log_path(agent, job)).read(), what="real report")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(os.path.join(agent.data_dir, "report.sock"))
        s.sendall(frame({"type": "hello", "job_id": str(job), "attempt": 1, "rank": 0,
                         "pid": os.getpid(), "secret": "guessed"}))
        try:
            s.sendall(frame({"type": "report", "seq": 2, "metrics": {"loss": 666.0}}))
        except BrokenPipeError:
            pass  # refused and closed already
        reply = read_frame(s)
        assert reply is not None and reply["type"] == "error", reply
        assert "refused" in reply["message"]
    time.sleep(1)  # what the rogue client sent would have been committed by now
    pts = server.request("GET", f"/api/v1/jobs/{job}/metrics?name=loss").json
    assert "666" not in json.dumps(pts), pts
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    server.wait_job(job, {"STOPPED"})


# ---- finding 7: the collective rendezvous ------------------------------------------------------

def fnv_job_hash(job_id, attempt):
    h = 1469598103934665603
    for ch in job_id.encode():
        h = ((h ^ ch) * 1099511628211) % (1 << 64)
    return ((h ^ attempt) * 1099511628211) % (1 << 64)


def test_a_rendezvous_intruder_is_refused_and_the_ranks_still_connect():
    bench = os.path.join(harness.BUILD_DIR, "bench", "allreduce_bench")
    if not os.path.exists(bench):
        pytest.skip("allreduce_bench not built")
    port = harness.free_port()
    base = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                TRAINYARD_JOB_ID="rv-job", TRAINYARD_ATTEMPT="1", TRAINYARD_BACKEND="native",
                TRAINYARD_TRANSPORT="tcp", TRAINYARD_RENDEZVOUS_SECRET="a" * 64,
                TRAINYARD_COLLECTIVE_TIMEOUT_S="20")
    args = [bench, "--min", "64", "--max", "64", "--seconds", "0.05"]
    rank0 = subprocess.Popen(args, env=dict(base, RANK="0"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    # The intruder knows everything but the secret: it claims rank 1 first.
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    intruder = wait_for(lambda: try_connect(port), what="rank 0 listening")
    addr = struct.pack(">H", 4) + struct.pack("!H", lst.getsockname()[1]) + \
        socket.inet_aton("127.0.0.1") + b"\0" * 12
    hello = struct.pack(">IIIIQ", 0x54595248, 1, 2, 1, fnv_job_hash("rv-job", 1)) + addr
    intruder.sendall(hello + b"\0" * 8)
    intruder.settimeout(3)
    try:
        got = intruder.recv(64)
    except socket.timeout:
        got = b"(nothing)"
    rank1 = subprocess.Popen(args, env=dict(base, RANK="1"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    out0, _ = rank0.communicate(timeout=60)
    out1, _ = rank1.communicate(timeout=60)
    intruder.close()
    lst.close()
    assert not got.startswith(struct.pack(">I", 0x54595254)), "the intruder got the table"
    assert rank0.returncode == 0 and rank1.returncode == 0, (out0, out1)


def try_connect(port):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        return s
    except OSError:
        s.close()
        return None


# ---- finding 9: reads across users ---------------------------------------------------------------

SECRET_READER = textwrap.dedent("""
    import os
    print("SEEN " + os.environ.get("API_KEY", "(unset)"), flush=True)
""")


def test_secret_env_reaches_the_worker_but_never_the_api(server, agent_factory):
    agent = agent_factory(cpus=1)
    alice = server.create_token("alice", "user")
    viewer = server.create_token("watcher", "viewer")
    job = server.submit({"name": "secret", "entrypoint": [PY, "-c", SECRET_READER],
                         "env": {"PLAIN": "visible"}, "secret_env": {"API_KEY": "hunter2"}},
                        token=alice)["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED"
    assert "SEEN hunter2" in agent.worker_log(job, 0)
    for tok in (alice, viewer, "admin"):
        body = server.request("GET", f"/api/v1/jobs/{job}", token=tok).json
        assert body["spec"]["secret_env"] == {"API_KEY": "<redacted>"}, body
        listed = server.request("GET", "/api/v1/jobs", token=tok).text
        assert "hunter2" not in listed
    assert stat.S_IMODE(os.stat(log_path(agent, job)).st_mode) == 0o600


def test_resume_from_another_users_checkpoint_is_refused(server, agent_factory):
    from test_resume import WRITER, run_script
    from test_checkpoints import wait_checkpoints
    agent_factory(cpus=1)
    first, _, done = run_script(server, WRITER, "alice-writer", 1)
    assert done["status"] == "SUCCEEDED"
    [ck] = wait_checkpoints(server, first, 1)
    bob = server.create_token("bob", "user")  # the writer ran as the admin
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true",
                                                "resume_from_checkpoint": ck["id"]}, token=bob)
    assert r.status == 403, r
    assert r.json["code"] == "checkpoint-forbidden"
    assert r.json["errors"][0]["field"] == "resume_from_checkpoint"
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true",
                                                "resume_from_checkpoint": ck["id"]})
    assert r.status == 201, r  # an admin may


# ---- finding 11 ----------------------------------------------------------------------------------

def test_a_long_status_filter_is_answered(server):
    job = server.submit({"name": "p", "entrypoint": "true"})["id"]
    q = ",".join(["pending", "RUNNING", "Stopped"] * 12)
    r = server.request("GET", f"/api/v1/jobs?status={q}")
    assert r.status == 200, r
    assert [j["id"] for j in r.json["jobs"]] == [job]


def test_idempotency_key_gives_the_same_job(server):
    alice = server.create_token("alice", "user")
    bob = server.create_token("bob", "user")
    spec = {"name": "once", "entrypoint": "true"}
    key = {"Idempotency-Key": "k-123"}
    first = server.request("POST", "/api/v1/jobs", spec, token=alice, headers=key)
    again = server.request("POST", "/api/v1/jobs", spec, token=alice, headers=key)
    assert first.status == 201 and again.status == 200, (first, again)
    assert again.json["id"] == first.json["id"]
    other = server.request("POST", "/api/v1/jobs", spec, token=bob, headers=key)
    assert other.status == 201 and other.json["id"] != first.json["id"]
    changed = server.request("POST", "/api/v1/jobs", dict(spec, name="twice"), token=alice,
                             headers=key)
    assert changed.status == 409 and changed.json["code"] == "idempotency-key-reused", changed
    jobs = server.request("GET", "/api/v1/jobs").json["jobs"]
    assert sorted(j["id"] for j in jobs) == sorted([first.json["id"], other.json["id"]])


class DropFirstReplyProxy(harness.TcpProxy):
    """A TCP proxy to `target` that forwards the first request it gets, then closes that
    connection without passing on the reply (a connection lost after the server got it); later
    connections are relayed both ways."""

    def relay(self, number, client, upstream):
        if number == 1:
            self.spawn(self._drop, client, upstream)
        else:
            super().relay(number, client, upstream)

    @staticmethod
    def _drop(c, up):
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            body += c.recv(65536)
        up.sendall(head + b"\r\n\r\n" + body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = up.recv(65536)
            if not chunk:
                break
            reply += chunk
        c.close()  # the reply is lost
        up.close()


def test_submit_retries_a_lost_submission_once(server, tmp_path):
    proxy = DropFirstReplyProxy(("127.0.0.1", server.port))
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "retried", "entrypoint": "true"}))
    try:
        r = harness.run_cli(server, "--server", f"http://127.0.0.1:{proxy.port}", "submit",
                            str(spec))
    finally:
        proxy.close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert proxy.connections >= 2
    jobs = server.request("GET", "/api/v1/jobs").json["jobs"]
    assert [j["id"] for j in jobs] == [int(r.stdout.strip())], jobs


def test_two_live_tokens_cannot_share_a_name(server):
    alice = server.create_token("alice", "user")
    job = server.submit({"name": "mine", "entrypoint": "sleep 600"}, token=alice)["id"]
    r = server.request("POST", "/api/v1/tokens", {"name": "alice", "role": "user"})
    assert r.status == 409 and r.json["code"] == "token-name-taken", r
    assert r.json["errors"][0]["field"] == "name"
    # Without a second "alice", nobody else owns alice's job.
    mallory = server.create_token("mallory", "user")
    assert server.request("POST", f"/api/v1/jobs/{job}/stop", token=mallory).status == 403
    # A revoked name may be given again (token rotation keeps the jobs).
    [tok] = [t for t in server.request("GET", "/api/v1/tokens").json["tokens"]
             if t["name"] == "alice"]
    assert server.request("DELETE", f"/api/v1/tokens/{tok['id']}").status == 204
    again = server.create_token("alice", "user")
    assert server.request("POST", f"/api/v1/jobs/{job}/stop", token=again).status in (200, 202)


def test_an_isolating_agent_refuses_a_data_dir_its_workers_cannot_reach():
    """Workers reach the report socket through the agent's data directory: an agent whose workers
    could not (a data directory under a 0700 directory, as /root is) refuses to start, saying
    which directory blocks them, instead of running jobs that silently cannot report."""
    if os.geteuid() != 0:
        assert not os.environ.get("CI"), "CI must run the suite as root"
        pytest.skip("per-job uids need an agent running as root")
    private = harness.make_tmpdir("ty-private-agent-")
    os.chmod(private, 0o700)
    data = os.path.join(private, "agent")
    env = dict(os.environ, TRAINYARD_AGENT_RUN_AS="auto")
    r = subprocess.run([harness.AGENT_BIN, "--server", "ws://127.0.0.1:9", "--token", "x",
                        "--data-dir", data], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode != 0, r.stdout
    assert f"cannot reach the data directory {data} ({private} is not searchable" in r.stdout, \
        r.stdout
