"""Worker logs end to end: what workers print (stdout and stderr) is streamed by their agent,
stored by the server and read back through GET /api/v1/jobs/{id}/logs, line by line; long lines
are split, invalid UTF-8 replaced; the per-job cap keeps the newest; neither a server nor an agent
killed with SIGKILL loses or repeats a line."""
import codecs
import os
import signal
import sys
import time

import pytest

import harness
from test_metrics import db_name

PY = sys.executable
LINE_MAX = 16384


codecs.register_error("ty_each_byte", lambda e: ("\ufffd" * (e.end - e.start), e.end))


def expected_lines(raw, line_max=LINE_MAX):
    """The lines the agent cuts `raw` into (agent_log_cut), for output that ends with '\\n'."""
    out = []
    for line in raw.split(b"\n")[:-1]:
        pieces = [line[i:i + line_max] for i in range(0, len(line), line_max)] or [b""]
        out += [p.decode("utf-8", "ty_each_byte").replace("\x00", "\ufffd") for p in pieces]
    return out


def logs(server, job, **params):
    q = "&".join(f"{k}={v}" for k, v in params.items())
    r = server.request("GET", f"/api/v1/jobs/{job}/logs" + (f"?{q}" if q else ""), timeout=120)
    assert r.status == 200, r
    return r


def rank_lines(server, job, rank, **params):
    text = logs(server, job, rank=rank, **params).text
    assert text.endswith("\n") or text == ""
    return text.split("\n")[:-1]


def wait_lines(server, job, rank, count, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = rank_lines(server, job, rank)
        if len(got) >= count:
            return got
        time.sleep(0.1)
    raise AssertionError(f"job {job} rank {rank}: {len(got)} lines, not {count}")


def printer(n, prefix="line", stderr_every=0, gate=None):
    """A worker printing n numbered lines (every stderr_every-th to stderr), optionally waiting
    for the file `gate` halfway."""
    script = ("import os, sys, time\n"
              "r = os.environ['RANK']\n"
              f"for i in range({n}):\n"
              f"    if i == {n // 2} and {gate!r}:\n"
              f"        while not os.path.exists({gate!r}): time.sleep(0.05)\n"
              f"    f = sys.stderr if {stderr_every} and i % {stderr_every or 1} == 0 "
              "else sys.stdout\n"
              f"    f.write('{prefix} %s %d \\x1b[32mgreen\\x1b[0m\\n' % (r, i)); f.flush()\n")
    return [PY, "-c", script]


def printed(n, rank, prefix="line"):
    return [f"{prefix} {rank} {i} \x1b[32mgreen\x1b[0m" for i in range(n)]


@pytest.fixture
def one_agent(agent_factory):
    return agent_factory(cpus=4)


def split_streams(lines, stderr_every):
    """(stdout's lines, stderr's lines) of what printer(..., stderr_every) printed."""
    return ([l for i, l in enumerate(lines) if i % stderr_every],
            [l for i, l in enumerate(lines) if i % stderr_every == 0])


def test_what_two_ranks_print_is_what_get_logs_returns(server, one_agent):
    import json
    job = server.submit({"name": "logs", "entrypoint": printer(500, stderr_every=7),
                         "scaling_config": {"num_workers": 2}})["id"]
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    # stdout and stderr are kept apart from the worker on: each in order, each line marked.
    for rank in (0, 1):
        want = printed(500, rank)
        out, err = split_streams(want, 7)
        assert sorted(wait_lines(server, job, rank, 500)) == sorted(want)
        assert rank_lines(server, job, rank, stream="stdout") == out
        assert rank_lines(server, job, rank, stream="stderr") == err
        assert one_agent.worker_log(job, rank, stream="stdout") == "".join(w + "\n" for w in out)
        assert one_agent.worker_log(job, rank, stream="stderr") == "".join(w + "\n" for w in err)
        rows = [json.loads(l) for l in logs(server, job, rank=rank, format="jsonl").text.splitlines()]
        assert sorted(x["line"] for x in rows if x["stream"] == "stderr") == sorted(err)
        assert sorted(x["line"] for x in rows if x["stream"] == "stdout") == sorted(out)
    # Both ranks: each line prefixed by its rank, each rank's lines of each stream in order.
    both = logs(server, job, stream="stdout").text.split("\n")[:-1]
    assert len(both) == 2 * len(split_streams(range(500), 7)[0])
    for rank in (0, 1):
        mine = [l[len(f"[rank {rank}] "):] for l in both if l.startswith(f"[rank {rank}] ")]
        assert mine == split_streams(printed(500, rank), 7)[0]
    # JSON lines, tail, grep.
    r = logs(server, job, rank=1, format="jsonl", tail=3, stream="stdout")
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    rows = [json.loads(l) for l in r.text.splitlines()]
    assert [x["line"] for x in rows] == split_streams(printed(500, 1), 7)[0][-3:]
    assert all(x["rank"] == 1 and x["attempt"] == 1 and x["stream"] == "stdout" for x in rows)
    r = server.request("GET", f"/api/v1/jobs/{job}/logs?rank=0&tail=2&stream=stderr",
                       headers={"Accept": "application/x-ndjson"})
    assert [json.loads(l)["line"] for l in r.text.splitlines()] == \
        split_streams(printed(500, 0), 7)[1][-2:]
    assert rank_lines(server, job, 0, grep="line%200%2042%20") == [printed(500, 0)[42]]
    assert rank_lines(server, job, 0, attempt=2) == []
    # The CLI prints the same, stderr's lines marked; --stderr prints only those.
    r = harness.run_cli(server, "logs", str(job), "--rank", "1", "--tail", "2", "--stdout")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(l + "\n" for l in split_streams(printed(500, 1), 7)[0][-2:])
    r = harness.run_cli(server, "logs", str(job), "--grep", " [78] ")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"[rank 0 stderr] {printed(500, 0)[7]}",
                                             f"[rank 0] {printed(500, 0)[8]}",
                                             f"[rank 1 stderr] {printed(500, 1)[7]}",
                                             f"[rank 1] {printed(500, 1)[8]}"]
    r = harness.run_cli(server, "logs", str(job), "--rank", "0", "--grep", " [78] ")
    assert sorted(r.stdout.splitlines()) == [f"[stderr] {printed(500, 0)[7]}", printed(500, 0)[8]]
    r = harness.run_cli(server, "logs", str(job), "--rank", "0", "--stderr")
    assert r.stdout == "".join(l + "\n" for l in split_streams(printed(500, 0), 7)[1]), r.stderr
    # /stream's log rows carry the stream too (logs --follow reads them).
    r = harness.run_cli(server, "-o", "json", "logs", str(job), "--follow", "--rank", "1",
                        "--stderr")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    assert [x["line"] for x in rows] == split_streams(printed(500, 1), 7)[1]
    assert {x["stream"] for x in rows} == {"stderr"}
    r = harness.run_cli(server, "logs", str(job), "--stderr", "--stdout")
    assert r.returncode == 2 and "--stderr" in r.stderr
    r = harness.run_cli(server, "logs", "999999")
    assert r.returncode == 1 and "999999" in r.stderr
    # Deleting the job deletes its logs.
    assert server.request("DELETE", f"/api/v1/jobs/{job}").status in (200, 204)
    assert server.request("GET", f"/api/v1/jobs/{job}/logs").status == 404


def test_bad_log_parameters_are_named_and_unknown_jobs_are_404(server):
    job = server.submit({"name": "nolog", "entrypoint": ["true"]})["id"]
    for q, field in [("rank=x", "rank"), ("rank=1,", "rank"), ("attempt=0", "attempt"),
                     ("offset=-1", "offset"), ("tail=0", "tail"), ("grep=(", "grep"),
                     ("format=xml", "format"), ("stream=stdin", "stream")]:
        r = server.request("GET", f"/api/v1/jobs/{job}/logs?{q}")
        assert r.status == 400, (q, r)
        assert r.headers["Content-Type"].startswith("application/problem+json")
        assert field in r.text, (q, r)
    assert server.request("GET", "/api/v1/jobs/999999/logs").status == 404
    assert server.request("GET", f"/api/v1/jobs/{job}/logs", token=None).status == 401


def test_binary_garbage_and_a_10_mib_line_are_replaced_and_split(server, one_agent):
    script = ("import sys\n"
              "o = sys.stdout.buffer\n"
              "o.write(b'before\\n' + bytes(range(256)) + b'\\n')\n"
              "o.write(b'caf\\xc3\\xa9 \\xff\\xfe half \\xe2\\x82\\n')\n"
              "o.write(b'x' * (10 * 1024 * 1024) + b'\\n')\n"
              "o.write(b'after\\n'); o.flush()\n")
    job = server.submit({"name": "garbage", "entrypoint": [PY, "-c", script]})["id"]
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    with open(os.path.join(one_agent.data_dir, "logs", str(job), "1", "rank-0.log"), "rb") as f:
        raw = f.read()
    want = expected_lines(raw)
    assert len(want) == 4 + 640 + 1
    got = wait_lines(server, job, 0, len(want), timeout=120)
    assert got[:4] == want[:4]
    assert got[1].startswith("\ufffd") and "\x1b" in got[2] and "\ufffd" * 128 in got[2]
    assert got[3] == "café \ufffd\ufffd half \ufffd\ufffd"
    assert got == want


def test_log_cap_keeps_the_newest_lines_and_says_what_was_dropped(server_factory, agent_factory,
                                                                   pg):
    cap = 1_500_000  # several chunks (the agent sends at most 256 KiB in one)
    n = 150_000  # about 4.5 MB
    server = server_factory(extra_args=["--max-log-bytes-per-job", str(cap)])
    agent_factory(server, cpus=2)
    job = server.submit({"name": "capped", "entrypoint": printer(n)})["id"]
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    want = printed(n, 0)
    deadline = time.time() + 60
    while time.time() < deadline:
        got = rank_lines(server, job, 0)
        if got and got[-1] == want[-1]:
            break
        time.sleep(0.2)
    assert got[-1] == want[-1]
    assert got == want[len(want) - len(got):]  # a suffix: the newest, in order, none missing
    assert sum(len(l.encode()) + 1 for l in got) <= cap
    assert len(got) < len(want)
    dropped = pg.psql(f"SELECT sum((body->>'bytes')::bigint) FROM job_stream WHERE job_id = {job} "
                      "AND kind = 'log_dropped'", db=db_name(server))
    assert int(dropped) == sum(len(l.encode()) + 1 for l in want[:len(want) - len(got)])


def test_server_killed_mid_job_loses_and_repeats_no_line(server_factory, agent_factory, tmp_path):
    server = server_factory()
    agent_factory(server, cpus=4)
    gate = str(tmp_path / "go")
    n = 6000
    job = server.submit({"name": "srvkill", "entrypoint": printer(n, gate=gate),
                         "scaling_config": {"num_workers": 2}})["id"]
    wait_lines(server, job, 0, n // 4)  # some lines stored, the rest still to come
    server.stop(sig=signal.SIGKILL)
    open(gate, "w").close()  # the second half is printed while the server is down
    time.sleep(0.5)
    server.start()
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    for rank in (0, 1):
        assert wait_lines(server, job, rank, n) == printed(n, rank)


def test_agent_killed_and_restarted_loses_no_line_and_its_exits_land(server_factory,
                                                                      agent_factory, tmp_path):
    server = server_factory()
    agent = agent_factory(server, cpus=4)
    gate = str(tmp_path / "go")
    n = 4000
    job = server.submit({"name": "agentkill", "entrypoint": printer(n, gate=gate),
                         "scaling_config": {"num_workers": 2}})["id"]
    wait_lines(server, job, 0, n // 4)
    # The server goes away; the workers finish meanwhile; their exits and the rest of their
    # output are only on the agent's disk when the agent is killed.
    server.stop(sig=signal.SIGKILL)
    open(gate, "w").close()
    spool = os.path.join(agent.data_dir, "spool")
    deadline = time.time() + 60
    while sorted(f for f in os.listdir(spool) if f.endswith(".exit")) != \
            [f"{job}.1.0.exit", f"{job}.1.1.exit"]:
        assert time.time() < deadline, os.listdir(spool)
        time.sleep(0.05)
    agent.kill()
    server.start()
    agent.start()
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    for rank in (0, 1):
        assert wait_lines(server, job, rank, n) == printed(n, rank)
    deadline = time.time() + 30
    while any(f.endswith(".exit") for f in os.listdir(spool)):  # acked, hence deleted
        assert time.time() < deadline, os.listdir(spool)
        time.sleep(0.05)


def test_agent_backlog_over_its_cap_skips_ahead_and_says_so(server_factory, agent_factory,
                                                             tmp_path, pg):
    server = server_factory()
    agent = agent_factory(server, cpus=2, extra_args=["--log-backlog-max-bytes", "1048576"])
    gate = str(tmp_path / "go")
    n = 400_000  # about 12 MB, the second half printed while the server is down
    job = server.submit({"name": "backlog", "entrypoint": printer(n, gate=gate)})["id"]
    want = printed(n, 0)
    # launched first: a server killed before it sent the launch leaves no worker to print
    server.wait_job(job, {"RUNNING"})
    server.stop(sig=signal.SIGKILL)
    open(gate, "w").close()
    spool = os.path.join(agent.data_dir, "spool")
    deadline = time.time() + 120
    while f"{job}.1.0.exit" not in os.listdir(spool):
        assert time.time() < deadline
        time.sleep(0.05)
    server.start()
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    deadline = time.time() + 60
    while time.time() < deadline:
        got = rank_lines(server, job, 0)
        if got and got[-1] == want[-1]:
            break
        time.sleep(0.2)
    # What is stored: the lines in order, with gaps (the agent skipped ahead whenever its
    # backlog passed the cap, also while the server was up but slower than the worker), and a
    # log_dropped row for each gap, saying how many bytes.
    p, skipped, gaps = 0, 0, 0
    for line in got:
        start = p
        while want[p] != line:
            skipped += len(want[p].encode()) + 1
            p += 1
        gaps += p > start
        p += 1
    assert p == len(want) and gaps >= 1 and skipped >= 1048576 // 2
    rows = pg.psql(f"SELECT count(*) || ' ' || sum((body->>'bytes')::bigint) || ' ' || "
                   f"string_agg(DISTINCT body->>'reason', ';') FROM job_stream "
                   f"WHERE job_id = {job} AND kind = 'log_dropped'", db=db_name(server))
    assert rows == f"{gaps} {skipped} the agent's backlog was over its cap"
