"""`trainyard events|metrics --follow` and `wait|submit --wait --follow`: the CLI's /stream client.

First against a scripted stand-in (fakestream.py) for what a real server will not do on demand —
drop the connection at a chosen row, resend rows, send `closing`, fragment a message around a
ping, refuse a token; then against the real server, agent and jobs."""
import re
import socket
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


def unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def test_unreachable_stream_exits_3_after_the_reconnect_timeout():
    r = run(None, "--reconnect-timeout", "1", "events", str(JOB), "--follow",
            env={"TRAINYARD_STREAM_URL": f"ws://127.0.0.1:{unused_port()}/stream"})
    assert r.returncode == 3
    assert "cannot reach the stream" in r.stderr


def test_wait_follow_on_an_unreachable_server_exits_3():
    fake = types.SimpleNamespace(url=f"http://127.0.0.1:{unused_port()}", admin_token=None)
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
