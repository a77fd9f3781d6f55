"""Agent, server and PostgreSQL restarts under a running job (docs/agent-restart.md): workers
outlive an agent killed with SIGKILL and are re-adopted by the next agent on the same data dir,
so the job finishes in its first attempt with every log line, report and checkpoint; workers of
an agent that never comes back are killed by their supervisors, never left running; a server or
PostgreSQL restart mid-job loses nothing either."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

import harness
from test_agent import workers_of
from test_logs import rank_lines
from test_metrics import db_name

PY = sys.executable
LINES = 200   # per rank, half before the gate, half after it
REPORTS = 6   # per rank, half before the gate, half after it

# Each rank prints, reports (with a checkpoint) and, halfway, writes <work>/at-gate-RANK and waits
# for <work>/go; then prints the second half and writes <work>/printed-RANK before its last
# reports, which may have to wait for an agent to come back.
WORKER = f"""
import os, sys, time
import trainyard
r = int(os.environ["RANK"])
work = os.getcwd()
def part(lo, hi, rlo, rhi):
    for i in range(lo, hi):
        print(f"rank {{r}} line {{i}}", flush=True)
    for k in range(rlo, rhi):
        d = os.path.join(work, f"ckpt-{{r}}-{{k}}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"part-{{r}}"), "w") as f:
            f.write(f"rank {{r}} round {{k}}")
        trainyard.report({{"loss": 1.0 / k, "step": k}}, checkpoint=d)
part(0, {LINES // 2}, 1, {REPORTS // 2 + 1})
open(os.path.join(work, f"at-gate-{{r}}"), "w").close()
while not os.path.exists(os.path.join(work, "go")):
    time.sleep(0.05)
part({LINES // 2}, {LINES}, {REPORTS // 2 + 1}, {REPORTS // 2 + 1})
open(os.path.join(work, f"printed-{{r}}"), "w").close()
part({LINES}, {LINES}, {REPORTS // 2 + 1}, {REPORTS + 1})
print(f"rank {{r}} done", flush=True)
"""


def submit(server, workers=2):
    work = harness.make_tmpdir("ty-restart-")
    os.chmod(work, 0o777)  # workers may run under uids of their own (TY_TEST_RUN_AS=auto)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WORKER)
    job = server.submit({"name": "restarts", "entrypoint": [PY, "train.py"],
                         "working_dir": work, "scaling_config": {"num_workers": workers}})
    return job["id"], work


def wait_files(paths, timeout=60):
    deadline = time.time() + timeout
    while not all(os.path.exists(p) for p in paths):
        assert time.time() < deadline, [p for p in paths if not os.path.exists(p)]
        time.sleep(0.05)


def expected(rank):
    return [f"rank {rank} line {i}" for i in range(LINES)] + [f"rank {rank} done"]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def supervisors(agent):
    """pid -> supervisor pid of every worker recorded in the agent's data dir."""
    d = os.path.join(agent.data_dir, "workers")
    out = {}
    for name in os.listdir(d):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                rec = json.load(f)
            out[rec["pid"]] = rec["supervisor_pid"]
    return out


def worker_lines(server, job, rank):
    """The rank's log lines but the SDK's heartbeat warning: a heartbeat (once a second) that
    falls while the agent is away prints "trainyard: heartbeat: cannot reach the agent: ...",
    and how long the agent stays away (its restart) is the machine's load's doing."""
    return [ln for ln in rank_lines(server, job, rank)
            if not ln.startswith("trainyard: heartbeat: cannot reach the agent: ")]


def assert_complete(server, pg, job, workers=2):
    """The job succeeded in attempt 1 with every line, report, metric and checkpoint, once."""
    done = server.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=120)
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 1, done
    for rank in range(workers):
        deadline = time.time() + 30
        while (got := worker_lines(server, job, rank)) != expected(rank) and \
                time.time() < deadline:
            time.sleep(0.1)
        assert got == expected(rank)
    db = db_name(server)
    counts = pg.psql(f"SELECT (SELECT count(*) FROM reports WHERE job_id = {job}) || ' ' || "
                     f"(SELECT count(*) FROM metrics WHERE job_id = {job}) || ' ' || "
                     f"(SELECT count(DISTINCT attempt) FROM reports WHERE job_id = {job})", db=db)
    # one number (loss) per report; step is a column of its row
    assert counts == f"{workers * REPORTS} {workers * REPORTS} 1", counts
    deadline = time.time() + 30
    while True:
        r = server.request("GET", f"/api/v1/jobs/{job}/checkpoints")
        assert r.status == 200, r
        if len(r.json["checkpoints"]) >= REPORTS or time.time() > deadline:
            break
        time.sleep(0.1)
    assert len(r.json["checkpoints"]) == REPORTS, r.json


def test_agent_killed_and_restarted_readopts_its_workers(server, agent_factory, pg):
    agent = agent_factory(server, cpus=4)
    job, work = submit(server)
    wait_files([os.path.join(work, f"at-gate-{r}") for r in (0, 1)])
    pids = [w["pid"] for w in workers_of(server, job)]
    agent.kill()
    assert all(alive(p) for p in pids)  # the workers outlive their agent
    # The second half of the output is written, and reports are tried, with no agent.
    open(os.path.join(work, "go"), "w").close()
    wait_files([os.path.join(work, f"printed-{r}") for r in (0, 1)])
    agent.start()
    assert "re-adopted job" in agent.log_text()
    assert_complete(server, pg, job)
    assert "restarted without it" not in server.log_text()


def test_workers_of_an_agent_that_does_not_come_back_are_killed(server_factory, agent_factory):
    server = server_factory(extra_args=["--heartbeat-timeout-s", "2"])
    agent = agent_factory(server)
    job = server.submit({"entrypoint": "sleep 1000 & wait",
                         "scaling_config": {"num_workers": 2}})["id"]
    server.wait_job(job, ["RUNNING"], timeout=30)
    pids = [w["pid"] for w in workers_of(server, job)]
    sups = supervisors(agent)
    assert sorted(sups) == sorted(pids)
    agent.kill()
    assert all(alive(p) for p in pids)
    agent.wait_node(statuses=("LOST",), timeout=30)
    deadline = time.time() + 60
    left = pids
    while left and time.time() < deadline:
        left = [p for p in pids if harness.processes_in_group(p) or alive(sups[p])]
        time.sleep(0.1)
    assert left == [], agent.log_text()


def test_supervisor_refuses_to_be_run_by_hand():
    sup = os.path.join(os.path.dirname(harness.AGENT_BIN), "trainyard-supervisor")
    for args in (["x", "/bin/true", "true"], ["5", "/bin/true", "true"]):
        # well-formed arguments too: without the agent's descriptors 3-5 it starts nothing
        r = subprocess.run([sup, *args], stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and "trainyard-agent only" in r.stderr


def test_server_killed_and_restarted_mid_job_loses_nothing(server, agent_factory, pg):
    agent_factory(server, cpus=4)
    job, work = submit(server)
    wait_files([os.path.join(work, f"at-gate-{r}") for r in (0, 1)])
    server.stop(sig=signal.SIGKILL)
    open(os.path.join(work, "go"), "w").close()
    wait_files([os.path.join(work, f"printed-{r}") for r in (0, 1)])
    server.start()
    assert_complete(server, pg, job)


@pytest.mark.own_postgres
def test_postgres_restarted_mid_job_loses_nothing(server, agent_factory, pg):
    agent_factory(server, cpus=4)
    job, work = submit(server)
    wait_files([os.path.join(work, f"at-gate-{r}") for r in (0, 1)])
    ctl = os.path.join(pg.bindir, "pg_ctl")
    pg._run([ctl, "stop", "-D", pg.pgdata, "-m", "fast", "-w"])
    # Down while the workers print and report: the server keeps serving what it can, the
    # agent keeps what is not acknowledged.
    open(os.path.join(work, "go"), "w").close()
    wait_files([os.path.join(work, f"printed-{r}") for r in (0, 1)])
    pg._run([ctl, "start", "-D", pg.pgdata, "-l", pg.log, "-w", "-o",
             f"-k {pg.sockdir} -c listen_addresses='' -c fsync=off -c max_connections=500 "
             "-c synchronous_commit=off"])
    assert_complete(server, pg, job)


def test_exit_while_the_agent_is_away_reaches_the_server_with_its_real_code(server,
                                                                             agent_factory):
    agent = agent_factory(server)
    work = harness.make_tmpdir("ty-restart-")
    os.chmod(work, 0o755)  # the worker may run under a uid of its own (TY_TEST_RUN_AS=auto)
    gate = pathlib.Path(work) / "go"
    job = server.submit({"entrypoint": f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 3"})["id"]
    server.wait_job(job, ["RUNNING"], timeout=30)
    pid = workers_of(server, job)[0]["pid"]
    sup = supervisors(agent)[pid]
    agent.kill()
    gate.touch()
    deadline = time.time() + 30
    while alive(sup):  # the supervisor recorded the exit and ended, with no agent to tell
        assert time.time() < deadline
        time.sleep(0.05)
    agent.start()
    done = server.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=60)
    assert done["status"] == "FAILED" and done["attempt"] == 1, done
    w = workers_of(server, job)[0]
    assert w["exit_code"] == 3 and w["signal"] is None, w


def test_agent_back_after_its_node_was_lost_stops_the_workers_it_readopts(server_factory,
                                                                           agent_factory):
    server = server_factory(extra_args=["--heartbeat-timeout-s", "2"])
    # Its supervisors would wait ten minutes: only the server can stop these workers in time.
    agent = agent_factory(server, extra_args=["--orphan-timeout-s", "600"])
    job = server.submit({"entrypoint": "sleep 1000 & wait"})["id"]
    server.wait_job(job, ["RUNNING"], timeout=30)
    pid = workers_of(server, job)[0]["pid"]
    agent.kill()
    agent.wait_node(statuses=("LOST",), timeout=30)
    assert server.wait_job(job, {"FAILED"}, timeout=30)["status"] == "FAILED"
    assert alive(pid)
    agent.start()
    deadline = time.time() + 60
    while harness.processes_in_group(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert harness.processes_in_group(pid) == [], agent.log_text()
    assert "no longer live there" in server.log_text()


# What another job's worker (a uid of its own) tries against the records that let a restarted
# agent re-adopt a worker: they hold its report secret, and its supervisor holds its exit.
SNOOP = """
import json, os, signal, sys
t = json.loads(sys.argv[1])
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ALLOWED"
    except Exception as e:
        out[name] = type(e).__name__
attempt("list_records", lambda: os.listdir(t["workers_dir"]))
attempt("read_record", lambda: open(t["record"]).read())
attempt("write_status", lambda: open(t["status"], "w").write("exit 0\\n"))
attempt("read_lease", lambda: open(t["lease"]).read())
attempt("kill_supervisor", lambda: os.kill(t["supervisor"], signal.SIGKILL))
print("RESULT " + json.dumps(out), flush=True)
"""


def test_a_job_cannot_read_or_forge_another_workers_records(server_factory, agent_factory):
    server = server_factory(extra_args=["--heartbeat-timeout-s", "120"])
    agent = agent_factory(server, env={"TRAINYARD_AGENT_RUN_AS": "auto"})
    victim = server.submit({"entrypoint": "sleep 600", "working_dir": "/tmp"})["id"]
    server.wait_job(victim, ["RUNNING"], timeout=30)
    pid = workers_of(server, victim)[0]["pid"]
    workers_dir = os.path.join(agent.data_dir, "workers")
    targets = {"workers_dir": workers_dir,
               "record": os.path.join(workers_dir, f"{victim}.1.0.json"),
               "status": os.path.join(workers_dir, f"{victim}.1.0.status"),
               "lease": os.path.join(agent.data_dir, "agent.lease"),
               "supervisor": supervisors(agent)[pid]}
    snoop = server.submit({"working_dir": "/tmp",
                           "entrypoint": [PY, "-c", SNOOP, json.dumps(targets)]})["id"]
    done = server.wait_job(snoop, {"SUCCEEDED", "FAILED"}, timeout=60)
    text = agent.worker_log(snoop, 0)
    assert done["status"] == "SUCCEEDED", text
    [line] = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    got = json.loads(line[len("RESULT "):])
    assert set(got) == {"list_records", "read_record", "write_status", "read_lease",
                        "kill_supervisor"}
    assert "ALLOWED" not in got.values(), got
    assert alive(targets["supervisor"]) and alive(pid)
    server.request("POST", f"/api/v1/jobs/{victim}/stop")
    assert server.wait_job(victim, {"STOPPED"}, timeout=30)["status"] == "STOPPED"


def test_workers_under_uids_of_their_own_reach_their_supervisor(server, agent_factory,
                                                                 monkeypatch):
    # The agent installed where workers cannot go (a clone under /root is 0700).
    hidden = harness.make_tmpdir("ty-hidden-")
    os.chmod(hidden, 0o700)
    for name in ("trainyard-agent", "trainyard-supervisor"):
        shutil.copy2(os.path.join(os.path.dirname(harness.AGENT_BIN), name), hidden)
    monkeypatch.setattr(harness, "AGENT_BIN", os.path.join(hidden, "trainyard-agent"))
    agent = agent_factory(server, env={"TRAINYARD_AGENT_RUN_AS": "auto"})
    job = server.submit({"entrypoint": "true", "working_dir": "/tmp"})["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert done["status"] == "SUCCEEDED", agent.worker_log(job, 0)
    assert os.stat(os.path.join(agent.data_dir, "bin", "trainyard-supervisor")).st_mode & 0o755 \
        == 0o755


def test_a_rank_that_ended_while_the_agent_was_away_does_not_take_its_job_mate(server,
                                                                                agent_factory):
    # Both ranks share the job's uid: the ended one must not have the uid's processes killed
    # while the other one still runs.
    agent = agent_factory(server, env={"TRAINYARD_AGENT_RUN_AS": "auto"})
    work = harness.make_tmpdir("ty-restart-")
    os.chmod(work, 0o755)
    script = f'while [ ! -e {work}/go-$RANK ]; do sleep 0.05; done'
    job = server.submit({"entrypoint": script, "working_dir": "/tmp",
                         "scaling_config": {"num_workers": 2}})["id"]
    server.wait_job(job, ["RUNNING"], timeout=30)
    pids = [w["pid"] for w in workers_of(server, job)]
    sups = supervisors(agent)
    agent.kill()
    pathlib.Path(work, "go-1").touch()
    deadline = time.time() + 30
    while alive(sups[pids[1]]):
        assert time.time() < deadline
        time.sleep(0.05)
    agent.start()
    assert alive(pids[0]) and alive(sups[pids[0]]), agent.log_text()
    pathlib.Path(work, "go-0").touch()
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 1, done
