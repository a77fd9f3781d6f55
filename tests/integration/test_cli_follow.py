"""`trainyard events|metrics|logs --follow` and `wait|submit --wait --follow`: the CLI's /stream
client.

First against a scripted stand-in (fakestream.py) for what a real server will not do on demand —
drop the connection at a chosen row, resend rows, send `closing`, fragment a message around a
ping, refuse a token; then against the real server, agent and jobs."""
import json
import os
import re
import signal
import subprocess
import time
import types

import pytest

import harness
from fakestream import FakeStream, log, report, status, event

JOB = 7


def run(fake, *args, token="tok", stream_url=True, env=None, timeout=60):
    """Runs the CLI against the fake's REST side and (unless stream_url is False) its stream."""
    target = types.SimpleNamespace(url=fake.http_url if fake else "http://127.0.0.1:1",
                                   admin_token=None)
    e = dict(env or {})
    if stream_url and fake:
        e["TRAINYARD_STREAM_URL"] = fake.url
    return harness.run_cli(target, *args, token=token, env=e, timeout=timeout)


def handshake(c, after):
    """The client's first two messages: auth with the token, then subscribe after `after`."""
    auth = c.expect("auth")
    assert auth["token"] == "tok"
    sub = c.expect("subscribe")
    assert sub["job"] == JOB and sub["after"] == after, sub
    return sub


@pytest.fixture
def fake_factory():
    made = []

    def make(scripts, **kw):
        f = FakeStream(scripts, **kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()
        assert not f.errors, f.errors


# --- the client against a scripted stream --------------------------------------------------------

def test_events_follow_resumes_after_a_dropped_connection_without_repeats(fake_factory):
    def first(c):
        handshake(c, 0)
        c.send({"type": "welcome", "role": "viewer"})
        c.send({"type": "subscribed", "job": JOB, "head": 2})
        c.send(status(JOB, 1, "PENDING", "waiting to be scheduled"))
        c.send(status(JOB, 2, "RUNNING"))
        c.drop()
        return False

    def second(c):
        handshake(c, 2)
        c.send({"type": "subscribed", "job": JOB, "head": 4})
        c.send(status(JOB, 2, "RUNNING"))  # a resend: must not print twice
        c.send(event(JOB, 3, "worker", {"rank": 1, "attempt": 1, "node_id": "n1",
                                        "status": "EXITED", "pid": 42, "exit_code": 0}, rank=1))
        c.send(status(JOB, 4, "SUCCEEDED"))

    fake = fake_factory([first, second])
    r = run(fake, "events", str(JOB), "--follow")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [
        "2026-11-23T07:43:04Z status PENDING (attempt 1): waiting to be scheduled",
        "2026-11-23T07:43:04Z status RUNNING (attempt 1)",
        "2026-11-23T07:43:04Z worker rank 1 EXITED (attempt 1) node_id n1 pid 42 exit_code 0",
        "2026-11-23T07:43:04Z status SUCCEEDED (attempt 1)",
    ]
    assert "resuming after seq 2" in r.stderr
    assert fake.settled()
    assert [s["after"] for s in fake.subscriptions()] == [0, 2]
    assert all("tok" not in c.path for c in fake.conns)  # the token never travels in the URL
    assert all(c.headers["sec-websocket-protocol"] == "trainyard-stream.v1" for c in fake.conns)


def test_closing_for_a_slow_reader_resubscribes_after_the_last_printed_seq(fake_factory):
    def first(c):
        handshake(c, 0)
        for seq in (1, 2, 3):
            c.send(report(JOB, seq, 0, seq * 10, {"loss": 1.0 / seq}))
        c.send({"type": "closing", "reason": "too slow", "resume": {"job": {str(JOB): 3}}})
        c.frame(0x8, b"\x03\xe8bye")
        return False

    def second(c):
        handshake(c, 3)
        c.send(report(JOB, 4, 0, 40, {"loss": 0.25}))
        c.send(report(JOB, 5, 1, 40, {"loss": 0.5}))
        c.send(status(JOB, 6, "FAILED"))

    fake = fake_factory([first, second])
    r = run(fake, "metrics", str(JOB), "--follow", "--rank", "0")
    assert r.returncode == 0, r.stderr
    steps = [re.search(r"step (\d+)", line).group(1) for line in r.stdout.splitlines()]
    assert steps == ["10", "20", "30", "40"]
    assert "too slow" in r.stderr


def test_fragmented_message_around_a_ping_is_read_and_the_ping_answered(fake_factory):
    def script(c):
        handshake(c, 0)
        text = b'{"type":"event","job":7,"seq":1,"kind":"event","data":{"status":"STOPPED"}}'
        c.frame(0x1, text[:10], fin=False)
        c.frame(0x9, b"are-you-there")
        c.frame(0x0, text[10:30], fin=False)
        c.frame(0x0, text[30:], fin=True)
        c.recv()  # the client closes after the terminal status

    fake = fake_factory([script])
    r = run(fake, "events", str(JOB), "--follow")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "STOPPED"
    assert fake.settled()
    assert fake.conns[0].pongs == [b"are-you-there"]


def test_events_without_follow_stops_at_the_head(fake_factory):
    def script(c):
        handshake(c, 0)
        c.send({"type": "subscribed", "job": JOB, "head": 2})
        c.send(status(JOB, 1, "PENDING"))
        c.send(status(JOB, 2, "RUNNING"))
        # nothing more: the job goes on, but `events` without --follow is done

    fake = fake_factory([script])
    r = run(fake, "events", str(JOB), timeout=20)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2


def test_stream_url_comes_from_the_version_reply(fake_factory):
    def script(c):
        handshake(c, 0)
        c.send({"type": "subscribed", "job": JOB, "head": 0})

    fake = fake_factory([script])
    r = run(fake, "events", str(JOB), stream_url=False)
    assert r.returncode == 0, r.stderr
    assert fake.conns and fake.conns[0].path == "/stream"


def test_refused_token_exits_1_with_the_servers_reason(fake_factory):
    def script(c):
        c.expect("auth")
        c.send({"type": "error", "code": "unauthorized", "detail": "unknown token"})
        c.frame(0x8, b"\x03\xf0")
        return False

    fake = fake_factory([script])
    r = run(fake, "events", str(JOB), "--follow")
    assert r.returncode == 1
    assert "unknown token" in r.stderr


def test_unavailable_database_is_retried_and_the_follow_resumes(fake_factory):
    def first(c):
        handshake(c, 0)
        c.send(status(JOB, 1, "RUNNING"))
        c.send({"type": "error", "code": "unavailable", "detail": "database unreachable"})

    def second(c):
        handshake(c, 1)
        c.send(status(JOB, 2, "SUCCEEDED"))

    fake = fake_factory([first, second])
    r = run(fake, "events", str(JOB), "--follow")
    assert r.returncode == 0, r.stderr
    assert printed_statuses(r.stdout) == ["RUNNING", "SUCCEEDED"]
    assert "database unreachable" in r.stderr


def test_unreachable_stream_exits_3_after_the_reconnect_timeout():
    r = run(None, "--reconnect-timeout", "1", "events", str(JOB), "--follow",
            env={"TRAINYARD_STREAM_URL": f"ws://127.0.0.1:{harness.free_port()}/stream"})
    assert r.returncode == 3
    assert "cannot reach the stream" in r.stderr


def test_stream_url_that_is_not_ws_is_a_usage_error():
    r = run(None, "events", str(JOB), env={"TRAINYARD_STREAM_URL": "https://example.org/stream"})
    assert r.returncode == 2
    assert "TRAINYARD_STREAM_URL" in r.stderr and "not a ws:// or wss:// URL" in r.stderr


def test_wait_follow_on_an_unreachable_server_exits_3():
    fake = types.SimpleNamespace(url=f"http://127.0.0.1:{harness.free_port()}", admin_token=None)
    r = harness.run_cli(fake, "wait", str(JOB), "--follow", token=None)
    assert r.returncode == 3
    assert fake.url in r.stderr


@pytest.mark.parametrize("final, code", [("SUCCEEDED", 0), ("FAILED", 1), ("STOPPED", 4)])
def test_wait_follow_prints_logs_by_rank_and_rank0_reports_then_exits_by_status(
        fake_factory, final, code):
    def script(c):
        handshake(c, 0)
        c.send(status(JOB, 1, "RUNNING"))
        c.send(log(JOB, 2, 0, ["hello from 0", "\x1b[32mgreen\x1b[0m"]))
        c.send(log(JOB, 3, 1, ["hello from 1"]))
        c.send(report(JOB, 4, 0, 10, {"loss": 0.5}))
        c.send(report(JOB, 5, 1, 10, {"loss": 0.75}))
        c.send(status(JOB, 6, final, "why it ended"))
        c.send(log(JOB, 7, 1, ["last words of 1"]))  # committed just after the status

    fake = fake_factory([script], job_status=final)
    r = run(fake, "wait", str(JOB), "--follow")
    assert r.returncode == code, r.stderr
    assert r.stdout.splitlines() == [
        "[rank 0] hello from 0",
        "[rank 0] \x1b[32mgreen\x1b[0m",
        "[rank 1] hello from 1",
        "[report] step 10 loss=0.5",
        "[rank 1] last words of 1",
        final,
    ]
    assert f"job {JOB} RUNNING" in r.stderr and f"job {JOB} {final}" in r.stderr


def test_wait_follow_times_out_with_exit_5(fake_factory):
    def script(c):
        handshake(c, 0)
        c.send(status(JOB, 1, "RUNNING"))

    fake = fake_factory([script], job_status="RUNNING")
    r = run(fake, "wait", str(JOB), "--follow", "--timeout", "1")
    assert r.returncode == 5
    assert "timed out" in r.stderr and "RUNNING" in r.stderr


# --- against the real server, agent and jobs ----------------------------------------------------

PYTHON = "/usr/bin/python3"

# Each rank prints N numbered lines, slowly enough for a server restart to land in the middle.
COUNTING = ("import os, sys, time\n"
            "r = os.environ['RANK']\n"
            "for i in range(int(sys.argv[1])):\n"
            "    print(f'rank {r} line {i}', flush=True)\n"
            "    time.sleep(float(sys.argv[2]))\n")


def restartable(database, **kw):
    """A server this test may SIGKILL and start again on the same ports, data dir and database."""
    return harness.Server(database_url=database, **kw).start()


def restart(server):
    again = harness.Server.__new__(harness.Server)
    again.__dict__.update(server.__dict__)
    again.proc = None
    return again.start()


def popen_cli(server, *args, env=None):
    e = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
             **(env or {}))
    return subprocess.Popen([harness.CLI_BIN, *args], env=e, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def statuses_of(server, job_id):
    """The job's status changes as GET /events lists them, consecutive repeats (warnings) kept."""
    return [e["status"] for e in server.request("GET", f"/api/v1/jobs/{job_id}/events").json["events"]]


def printed_statuses(stdout):
    return [m.group(1) for m in re.finditer(r" status ([A-Z]+)", stdout)]


def test_events_follow_prints_status_changes_in_order_and_exits_when_the_job_ends(
        server, agent_factory, cli):
    agent_factory().wait_node()
    job = server.submit({"name": "short", "entrypoint": "sleep 1"})["id"]
    r = cli("events", str(job), "--follow", timeout=120)
    assert r.returncode == 0, r.stderr
    assert server.request("GET", f"/api/v1/jobs/{job}").json["status"] == "SUCCEEDED"
    printed = printed_statuses(r.stdout)
    assert printed == statuses_of(server, job)
    assert printed[0] == "PENDING" and printed[-1] == "SUCCEEDED"
    assert "RUNNING" in printed
    assert re.search(r" worker rank 0 EXITED .*exit_code 0", r.stdout), r.stdout


REPORTING = ("import os, trainyard\n"
             "rank = int(os.environ['RANK'])\n"
             "for step in range(1, 4):\n"
             "    print(f'rank {rank} at {step}', flush=True)\n"
             "    trainyard.report({'loss': step + rank / 10, 'step': step * 10})\n")


def test_submit_wait_follow_prints_one_line_per_rank0_report(server, agent_factory, cli,
                                                             tmp_path):
    agent_factory().wait_node()
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "reporting", "entrypoint": [PYTHON, "-c", REPORTING],
                                "scaling_config": {"num_workers": 2}}))
    r = cli("submit", str(spec), "--wait", "--follow", timeout=120)
    assert r.returncode == 0, r.stderr
    reports = [line for line in r.stdout.splitlines() if line.startswith("[report]")]
    assert reports == [f"[report] step {s * 10} loss={float(s)}" for s in range(1, 4)], r.stdout


@pytest.mark.parametrize("entrypoint, code, final", [
    ("echo all good", 0, "SUCCEEDED"),
    ("echo going down; exit 3", 1, "FAILED"),
])
def test_submit_wait_follow_exits_by_the_jobs_outcome(server, agent_factory, cli,
                                                       tmp_path, entrypoint, code, final):
    agent_factory().wait_node()
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "outcome", "entrypoint": entrypoint}))
    r = cli("submit", str(spec), "--wait", "--follow", timeout=120)
    assert r.returncode == code, r.stderr
    job_id = int(r.stdout.splitlines()[0])
    assert server.request("GET", f"/api/v1/jobs/{job_id}").json["status"] == final
    assert f"job {job_id} {final}" in r.stderr


def test_submit_wait_follow_exits_4_when_the_job_is_stopped(server, agent_factory,
                                                             tmp_path):
    agent_factory().wait_node()
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "long", "entrypoint": "sleep 60"}))
    p = popen_cli(server, "submit", str(spec), "--wait", "--follow")
    job_id = int(p.stdout.readline())
    server.wait_job(job_id, {"RUNNING"})
    assert server.request("POST", f"/api/v1/jobs/{job_id}/stop").status in (200, 202)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 4, err
    assert f"job {job_id} STOPPED" in err


def test_submit_wait_follow_times_out_with_exit_5(server, cli, tmp_path):
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "never-placed", "entrypoint": "true"}))  # no agent
    r = cli("submit", str(spec), "--wait", "--follow", "--wait-timeout", "2")
    assert r.returncode == 5, r.stderr
    assert "timed out" in r.stderr and "PENDING" in r.stderr


def test_wait_follow_exits_3_when_the_server_dies_for_good(database, agent_factory):
    server = restartable(database)
    try:
        agent_factory(server).wait_node()
        job = server.submit({"name": "orphan", "entrypoint": "sleep 60"})["id"]
        server.wait_job(job, {"RUNNING"})
        p = popen_cli(server, "--reconnect-timeout", "3", "wait", str(job), "--follow")
        time.sleep(0.5)
        server.stop(signal.SIGKILL)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 3, err
        assert "cannot reach" in err
    finally:
        server.stop(signal.SIGKILL)


def two_ranks_counting(lines, pause):
    return {"name": "counting", "entrypoint": [PYTHON, "-c", COUNTING, str(lines), str(pause)],
            "scaling_config": {"num_workers": 2}}


def test_events_follow_across_a_server_sigkill_prints_each_change_once(database, agent_factory):
    server = restartable(database)
    again = None
    try:
        agent_factory(server).wait_node()
        job = server.submit(two_ranks_counting(60, 0.1))["id"]
        p = popen_cli(server, "events", str(job), "--follow")
        server.wait_job(job, {"RUNNING"})
        time.sleep(1)
        server.stop(signal.SIGKILL)
        again = restart(server)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert printed_statuses(out) == statuses_of(again, job)
        assert printed_statuses(out)[-1] == "SUCCEEDED"
        for rank in (0, 1):
            assert len(re.findall(rf" worker rank {rank} EXITED ", out)) == 1, out
        assert "resuming after seq" in err
    finally:
        server.stop(signal.SIGKILL)
        if again:
            assert again.stop() == 0, again.log_text()


def test_wait_follow_across_a_server_sigkill_prints_each_log_line_once(database, agent_factory,
                                                                         tmp_path):
    server = restartable(database)
    again = None
    try:
        agent_factory(server).wait_node()
        spec = tmp_path / "job.json"
        lines = 60
        spec.write_text(json.dumps(two_ranks_counting(lines, 0.1)))
        p = popen_cli(server, "submit", str(spec), "--wait", "--follow")
        job = int(p.stdout.readline())
        server.wait_job(job, {"RUNNING"})
        time.sleep(2)
        server.stop(signal.SIGKILL)
        again = restart(server)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        for rank in (0, 1):
            got = [line for line in out.splitlines() if line.startswith(f"[rank {rank}] ")]
            assert got == [f"[rank {rank}] rank {rank} line {i}" for i in range(lines)], err
        assert "resuming after seq" in err
    finally:
        server.stop(signal.SIGKILL)
        if again:
            assert again.stop() == 0, again.log_text()


def test_logs_follow_prints_each_ranks_lines_once_then_exits_when_the_job_ends(
        server, agent_factory, cli):
    agent_factory().wait_node()
    job = server.submit(two_ranks_counting(20, 0.05))["id"]
    r = cli("logs", str(job), "--follow", timeout=120)
    assert r.returncode == 0, r.stderr
    assert server.request("GET", f"/api/v1/jobs/{job}").json["status"] == "SUCCEEDED"
    for rank in (0, 1):
        got = [line for line in r.stdout.splitlines() if line.startswith(f"[rank {rank}] ")]
        assert got == [f"[rank {rank}] rank {rank} line {i}" for i in range(20)], r.stdout
    one = cli("logs", str(job), "--follow", "--rank", "1", "--grep", "line 1[0-9]$")
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines() == [f"rank 1 line {i}" for i in range(10, 20)]
    as_json = cli("-o", "json", "logs", str(job), "--follow")
    assert as_json.returncode == 0, as_json.stderr
    stored = cli("-o", "json", "logs", str(job))
    assert stored.returncode == 0, stored.stderr
    key = lambda o: (o["rank"], o["offset"], o["line"])
    assert sorted(map(json.loads, as_json.stdout.splitlines()), key=key) == \
        sorted(map(json.loads, stored.stdout.splitlines()), key=key)


def test_logs_follow_with_tail_is_a_usage_error():
    r = run(None, "logs", "1", "--follow", "--tail", "5")
    assert r.returncode == 2
    assert "--tail" in r.stderr
