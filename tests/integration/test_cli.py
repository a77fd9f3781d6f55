"""The `trainyard` command line client against a real server and PostgreSQL (and, for the cases
the real server cannot produce, against tiny local stand-ins).

Not covered here yet, because they need parts that do not exist when this was written:
  - `submit --wait` / `wait` on a job that SUCCEEDS (needs an agent to run it);
  - `workers`, `metrics`, `nodes`, `drain` against the real server (test_cluster.py and
    test_metrics.py cover those endpoints).
"""
import functools
import http.server
import json
import os
import re
import socket
import subprocess
import threading
import time
import types

import pytest

import harness

SPEC = {"name": "mnist", "entrypoint": ["python3", "train.py"],
        "scaling_config": {"num_workers": 2}}


def write_spec(tmp_path, spec, name="job.json"):
    path = tmp_path / name
    path.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    return str(path)


def table(stdout):
    """Parses an aligned table: a list of dicts keyed by the header's column names."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, re.split(r"\s{2,}", line.strip()))) for line in lines[1:]]


def key_values(stdout):
    """Parses `key: value` lines into a dict."""
    out = {}
    for line in stdout.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def run_without_server(*args, url="http://127.0.0.1:1", input=None, env=None):
    """Runs the CLI against `url` with no server fixture (usage errors, unreachable servers)."""
    fake = types.SimpleNamespace(url=url, admin_token=None)
    return harness.run_cli(fake, *args, token=None, input=input, env=env)


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs and tokens."""
    return module_server_factory()


# --- submit -------------------------------------------------------------------------------------

def test_submit_prints_job_id_alone_and_job_exists(cli, server, tmp_path):
    r = cli("submit", write_spec(tmp_path, SPEC))
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"\d+\n", r.stdout)
    job = server.request("GET", f"/api/v1/jobs/{int(r.stdout)}").json
    assert job["name"] == "mnist" and job["status"] == "PENDING"
    assert job["spec"]["entrypoint"] == ["python3", "train.py"]


def test_submit_reads_spec_from_stdin(cli, server):
    r = cli("submit", "-", input=json.dumps(SPEC))
    assert r.returncode == 0, r.stderr
    assert server.request("GET", f"/api/v1/jobs/{int(r.stdout)}").json["name"] == "mnist"


def test_submit_invalid_spec_shows_each_bad_field_and_exits_1(cli, server, tmp_path):
    bad = {"entrypoint": "x", "scaling_config": {"num_workers": 0}, "bogus": 1}
    r = cli("submit", write_spec(tmp_path, bad))
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith("error: ")
    expected = server.request("POST", "/api/v1/jobs", bad).json
    assert f"error: {expected['title']}: {expected['detail']}" in r.stderr
    for e in expected["errors"]:
        assert f"  {e['field']}: {e['detail']}" in r.stderr
    assert "scaling_config.num_workers" in r.stderr and "bogus" in r.stderr


def test_submit_missing_file_exits_2_naming_the_file(cli, tmp_path):
    missing = str(tmp_path / "nope.json")
    r = cli("submit", missing)
    assert r.returncode == 2
    assert missing in r.stderr and "No such file" in r.stderr


def test_submit_malformed_json_exits_2_with_line_and_column_and_sends_nothing(cli, server,
                                                                               tmp_path):
    path = write_spec(tmp_path, '{\n  "name": "x",\n  "entrypoint": oops\n}\n')
    before = server.request("GET", "/api/v1/jobs").json["jobs"]
    r = cli("submit", path)
    assert r.returncode == 2
    assert re.search(re.escape(path) + r":3:\d+: invalid JSON", r.stderr), r.stderr
    assert server.request("GET", "/api/v1/jobs").json["jobs"] == before


def test_submit_spec_that_is_not_an_object_exits_2(cli):
    r = cli("submit", "-", input="[1, 2]")
    assert r.returncode == 2
    assert "must be a JSON object" in r.stderr


def without_status_message(job):
    return {k: v for k, v in job.items() if k != "status_message"}


def scheduled(server, job):
    """Waits for the scheduler's first verdict on a new job (it rewrites status_message), so
    that two reads of the job compare equal."""
    deadline = time.time() + 10
    while time.time() < deadline:
        j = server.request("GET", f"/api/v1/jobs/{job['id']}").json
        if j["status_message"] != "waiting to be scheduled":
            return j
        time.sleep(0.05)
    raise AssertionError(f"job {job['id']} was never considered by the scheduler")


def test_submit_json_output_is_the_created_job(cli, server, tmp_path):
    r = cli("--output", "json", "submit", write_spec(tmp_path, SPEC))
    assert r.returncode == 0, r.stderr
    created = json.loads(r.stdout)
    # The scheduler may have rewritten status_message since the 201.
    assert without_status_message(created) == without_status_message(
        server.request("GET", f"/api/v1/jobs/{created['id']}").json)


# --- list ---------------------------------------------------------------------------------------

@pytest.fixture
def own_server(server_factory):
    """A server of the test's own: for a test that reads the whole job list."""
    return server_factory()


@pytest.fixture
def own_cli(own_server):
    return functools.partial(harness.run_cli, own_server)


def test_list_shows_submitted_jobs_newest_first(own_cli, own_server):
    cli, server = own_cli, own_server
    ids = [server.submit(dict(SPEC, name=f"job{i}"))["id"] for i in range(3)]
    r = cli("list")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split() == ["ID", "NAME", "STATUS", "WORKERS", "OWNER",
                                                "CREATED"]
    rows = table(r.stdout)
    assert [int(row["ID"]) for row in rows] == sorted(ids, reverse=True)
    assert [row["NAME"] for row in rows] == ["job2", "job1", "job0"]
    assert all(row["STATUS"] == "PENDING" and row["WORKERS"] == "2" and row["OWNER"] == "admin"
               for row in rows)


def test_list_status_filter_shows_only_matching_jobs(own_cli, own_server):
    cli, server = own_cli, own_server
    stopped = server.submit(dict(SPEC, name="stopped"))["id"]
    server.submit(dict(SPEC, name="pending"))
    assert server.request("POST", f"/api/v1/jobs/{stopped}/stop").status == 202
    server.wait_job(stopped, {"STOPPED"})

    r = cli("list", "--status", "STOPPED")
    assert r.returncode == 0, r.stderr
    assert [row["NAME"] for row in table(r.stdout)] == ["stopped"]
    # Lower case and lists are accepted too.
    r = cli("list", "--status", "pending")
    assert [row["NAME"] for row in table(r.stdout)] == ["pending"]
    r = cli("list", "--status=PENDING,STOPPED")
    assert [row["NAME"] for row in table(r.stdout)] == ["pending", "stopped"]


def test_list_unknown_status_shows_server_error_and_exits_1(cli):
    r = cli("list", "--status", "BOGUS")
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and "BOGUS" in r.stderr


def test_list_pages_with_limit_and_all_follows_the_cursor(own_cli, own_server):
    cli, server = own_cli, own_server
    ids = [server.submit(dict(SPEC, name=f"job{i}"))["id"] for i in range(5)]
    r = cli("list", "--limit", "2")
    assert r.returncode == 0, r.stderr
    assert [int(row["ID"]) for row in table(r.stdout)] == sorted(ids, reverse=True)[:2]
    assert "--all" in r.stderr  # tells the user there is more

    r = cli("list", "--limit", "2", "--all")
    assert r.returncode == 0, r.stderr
    assert [int(row["ID"]) for row in table(r.stdout)] == sorted(ids, reverse=True)

    r = cli("--output", "json", "list", "--limit", "2", "--all")
    merged = json.loads(r.stdout)
    assert [j["id"] for j in merged["jobs"]] == sorted(ids, reverse=True)
    assert merged["next_cursor"] is None


def test_list_json_output_equals_the_api_response(cli, server):
    for i in range(2):
        scheduled(server, server.submit(dict(SPEC, name=f"job{i}")))
    r = cli("list", "--output", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == server.request("GET", "/api/v1/jobs").json


def test_output_mode_can_come_from_the_environment(cli, server):
    job = scheduled(server, server.submit(SPEC))
    r = cli("get", str(job["id"]), env={"TRAINYARD_OUTPUT": "json"})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == server.request("GET", f"/api/v1/jobs/{job['id']}").json
    # The flag wins over the environment.
    r = cli("get", str(job["id"]), "-o", "table", env={"TRAINYARD_OUTPUT": "json"})
    assert key_values(r.stdout)["status"] == "PENDING"


# --- get / stop / delete ------------------------------------------------------------------------

def test_get_shows_job_as_key_value_lines(cli, server):
    job = server.submit(SPEC)
    r = cli("get", str(job["id"]))
    assert r.returncode == 0, r.stderr
    kv = key_values(r.stdout)
    assert kv["id"] == str(job["id"]) and kv["name"] == "mnist" and kv["status"] == "PENDING"
    assert kv["owner"] == "admin" and kv["workers"] == "2"
    assert kv["entrypoint"] == "python3 train.py"
    assert kv["finished_at"] == "-"


def test_get_json_output_equals_the_api_response(cli, server):
    job = scheduled(server, server.submit(SPEC))
    r = cli("--output=json", "get", str(job["id"]))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == server.request("GET", f"/api/v1/jobs/{job['id']}").json


def test_get_unknown_job_shows_server_message_and_exits_1(cli, server):
    expected = server.request("GET", "/api/v1/jobs/999999").json
    r = cli("get", "999999")
    assert r.returncode == 1
    assert r.stderr.startswith(f"error: {expected['title']}: {expected['detail']}")


def test_get_rejects_non_numeric_id_locally(cli):
    r = cli("get", "abc")
    assert r.returncode == 2
    assert "abc" in r.stderr and "--help" in r.stderr


def test_stop_then_delete_round_trip(cli, server):
    job_id = str(server.submit(SPEC)["id"])
    r = cli("stop", job_id)
    assert r.returncode == 0, r.stderr
    assert "STOPP" in r.stdout
    server.wait_job(int(job_id), {"STOPPED"})

    r = cli("delete", job_id)
    assert r.returncode == 0, r.stderr
    assert server.request("GET", f"/api/v1/jobs/{job_id}").status == 404
    r = cli("get", job_id)
    assert r.returncode == 1 and job_id in r.stderr


def test_delete_unfinished_job_shows_the_409_message_and_exits_1(cli, server):
    job_id = server.submit(SPEC)["id"]
    expected = server.request("DELETE", f"/api/v1/jobs/{job_id}")
    assert expected.status == 409
    r = cli("delete", str(job_id))
    assert r.returncode == 1
    assert f"error: {expected.json['title']}: {expected.json['detail']}" in r.stderr
    assert server.request("GET", f"/api/v1/jobs/{job_id}").status == 200


def test_stop_finished_job_shows_server_message_and_exits_1(cli, server):
    job_id = server.submit(SPEC)["id"]
    assert cli("stop", str(job_id)).returncode == 0
    server.wait_job(job_id, {"STOPPED"})
    r = cli("stop", str(job_id))
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and str(job_id) in r.stderr


# --- wait (without agents: only the outcomes that need no worker) -------------------------------

def test_wait_on_stopped_job_prints_status_and_exits_4(cli, server):
    job_id = server.submit(SPEC)["id"]
    server.request("POST", f"/api/v1/jobs/{job_id}/stop")
    server.wait_job(job_id, {"STOPPED"})
    r = cli("wait", str(job_id))
    assert r.returncode == 4
    assert r.stdout == "STOPPED\n"
    assert f"job {job_id} STOPPED" in r.stderr


def test_wait_times_out_on_a_job_that_stays_pending(cli, server):
    job_id = server.submit(SPEC)["id"]
    r = cli("wait", str(job_id), "--timeout", "1")
    assert r.returncode == 5
    assert "timed out" in r.stderr and "PENDING" in r.stderr


def test_submit_wait_prints_id_then_exits_5_when_wait_times_out(cli, server, tmp_path):
    r = cli("submit", write_spec(tmp_path, SPEC), "--wait", "--wait-timeout", "1")
    assert r.returncode == 5
    assert re.fullmatch(r"\d+\n", r.stdout)
    assert "timed out" in r.stderr


def test_wait_on_unknown_job_exits_1(cli):
    r = cli("wait", "999999", "--timeout", "5")
    assert r.returncode == 1
    assert "999999" in r.stderr


# --- tokens and roles ---------------------------------------------------------------------------

def test_token_create_list_delete(cli, server):
    r = cli("token", "create", "--name", "alice", "--role", "user")
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip()
    assert token.startswith("ty_") and "\n" not in token
    assert cli("list", token=token).returncode == 0

    r = cli("token", "list")
    assert r.returncode == 0, r.stderr
    rows = {row["NAME"]: row for row in table(r.stdout)}
    assert rows["alice"]["ROLE"] == "user"

    r = cli("token", "delete", rows["alice"]["ID"])
    assert r.returncode == 0, r.stderr
    r = cli("list", token=token)
    assert r.returncode == 1 and r.stderr.startswith("error: ")
    assert "alice" not in cli("token", "list").stdout


def test_token_list_json_output_equals_the_api_response(cli, server):
    server.create_token("bob", "viewer")
    r = cli("-o", "json", "token", "list")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == server.request("GET", "/api/v1/tokens").json


def test_token_create_needs_name_and_role(cli):
    r = cli("token", "create", "--name", "alice")
    assert r.returncode == 2
    assert "--role" in r.stderr and "--help" in r.stderr


def test_token_create_bad_role_shows_the_field(cli):
    r = cli("token", "create", "--name", "alice", "--role", "emperor")
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and "role" in r.stderr


def test_viewer_token_cannot_submit_and_sees_the_403_detail(cli, server, tmp_path):
    viewer = server.create_token("val", "viewer")
    expected = server.request("POST", "/api/v1/jobs", SPEC, token=viewer)
    assert expected.status == 403
    r = cli("submit", write_spec(tmp_path, SPEC), token=viewer)
    assert r.returncode == 1
    assert f"error: {expected.json['title']}: {expected.json['detail']}" in r.stderr
    assert cli("list", token=viewer).returncode == 0


def test_missing_token_shows_the_401_detail(cli, server):
    expected = server.request("GET", "/api/v1/jobs", token=None)
    assert expected.status == 401
    r = cli("list", token=None)
    assert r.returncode == 1
    assert f"error: {expected.json['title']}: {expected.json['detail']}" in r.stderr


def test_token_and_server_flags_override_the_environment(cli, server):
    r = cli("--server", server.url, "list", "--token", server.admin_token,
            token="ty_wrong", env={"TRAINYARD_SERVER": "http://127.0.0.1:1"})
    assert r.returncode == 0, r.stderr


# --- health / version / help --------------------------------------------------------------------

def test_health_and_version(cli, server):
    r = cli("health")
    assert r.returncode == 0, r.stderr
    assert key_values(r.stdout) == {"status": "ok", "database": "ok", "role": "leader", "auth": "token"}
    r = cli("version")
    assert r.returncode == 0, r.stderr
    kv = key_values(r.stdout)
    assert kv["server"] == server.request("GET", "/api/v1/version").json["version"]
    assert kv["client"] and kv["api"] == "v1"
    r = cli("version", "--output", "json")
    assert json.loads(r.stdout) == server.request("GET", "/api/v1/version").json


def test_help_lists_every_command():
    r = run_without_server("--help")
    assert r.returncode == 0
    for cmd in ("submit", "list", "get", "stop", "delete", "wait", "workers", "metrics",
                "events", "nodes", "drain", "undrain", "token create", "token list",
                "token delete", "project create", "project list", "project add-member",
                "project remove-member", "project delete", "health", "version"):
        assert f"  {cmd}" in r.stdout, cmd
    assert "TRAINYARD_SERVER" in r.stdout and "TRAINYARD_TOKEN" in r.stdout


def test_command_help_shows_its_options():
    r = run_without_server("submit", "--help")
    assert r.returncode == 0
    assert "--wait" in r.stdout and "--wait-timeout" in r.stdout
    r = run_without_server("token", "--help")
    assert r.returncode == 0 and "create" in r.stdout


# --- usage errors and unreachable servers -------------------------------------------------------

@pytest.mark.parametrize("args, named", [
    (["frobnicate"], "frobnicate"),
    (["token", "frob"], "token frob"),
    (["list", "--bogus"], "--bogus"),
    (["get"], "ID"),
    (["get", "1", "2"], "2"),
    (["list", "--limit"], "--limit"),
    (["list", "--limit", "0"], "--limit"),
    (["--output", "xml", "list"], "xml"),
    (["submit"], "FILE"),
    (["submit", "x.json", "--wait-timeout", "5"], "--wait"),
    (["submit", "x.json", "--follow"], "--wait"),
    (["events"], "ID"),
    (["--reconnect-timeout", "0", "events", "1"], "--reconnect-timeout"),
])
def test_usage_errors_exit_2_naming_the_problem_and_pointing_at_help(args, named):
    r = run_without_server(*args)
    assert r.returncode == 2, r
    assert named in r.stderr and "--help" in r.stderr
    assert r.stdout == ""


def test_no_arguments_prints_usage_and_exits_2():
    r = run_without_server()
    assert r.returncode == 2
    assert "Usage" in r.stderr


def test_bad_output_mode_in_the_environment_names_the_variable():
    r = run_without_server("list", env={"TRAINYARD_OUTPUT": "yaml"})
    assert r.returncode == 2
    assert "TRAINYARD_OUTPUT" in r.stderr


def test_unreachable_server_exits_3_naming_the_url():
    url = f"http://127.0.0.1:{harness.free_port()}"
    r = run_without_server("list", url=url)
    assert r.returncode == 3
    assert url in r.stderr and "connect" in r.stderr.lower()


# --- odd servers ---------------------------------------------------------------------------------

class _OddHandler(http.server.BaseHTTPRequestHandler):
    """Answers with whatever the path asks for: not JSON, HTML errors, truncated JSON."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        replies = {
            "/api/v1/health": (200, "text/html", b"<html>\x1b[31mnot json</html>"),
            "/api/v1/jobs/1": (502, "text/html", b"<h1>Bad Gateway</h1>"),
            "/api/v1/jobs/2": (200, "application/json", b'{"id": 2, "status": "RUN'),
            "/api/v1/jobs/3": (500, "application/problem+json", b'{"status": 500}'),
            "/api/v1/jobs": (200, "application/json", b'{"jobs": 7}'),
        }
        status, ctype, body = replies.get(self.path.split("?")[0], (404, "text/plain", b"no"))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def odd_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OddHandler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()
    thread.join()


@pytest.mark.parametrize("args, shown", [
    (["health"], "not json"),
    (["get", "1"], "502"),
    (["get", "2"], "RUN"),
    (["get", "3"], "500"),
    (["list"], "jobs"),
    (["wait", "2"], "RUN"),
])
def test_odd_server_replies_exit_1_with_status_or_first_bytes(odd_server, args, shown):
    r = run_without_server(*args, url=odd_server)
    assert r.returncode == 1, r
    assert r.stderr.startswith("error: ") and shown in r.stderr
    assert "\x1b" not in r.stderr  # server bytes cannot drive the terminal


def test_server_that_never_answers_times_out_and_exits_3():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        r = run_without_server("health", "--request-timeout", "1", url=url)
    assert r.returncode == 3
    assert url in r.stderr and "timed out" in r.stderr.lower()


# Not in the ASan build: valgrind cannot run ASan binaries; LeakSanitizer checks the CLI there.
@pytest.mark.not_sanitized
def test_client_is_valgrind_clean_on_a_full_round_trip(cli, server, tmp_path):
    if not os.path.exists("/usr/bin/valgrind"):
        pytest.skip("valgrind not installed (scripts/install-deps.sh installs it)")
    spec = write_spec(tmp_path, SPEC)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token)
    for args in (["submit", spec], ["list", "--all", "--limit", "1"], ["-o", "json", "get", "1"],
                 ["get", "1"], ["delete", "1"], ["token", "list"], ["frob"],
                 ["--server", "http://127.0.0.1:1", "health"]):
        r = subprocess.run(["valgrind", "-q", "--leak-check=full", "--error-exitcode=99",
                            "--errors-for-leak-kinds=definite,indirect", harness.CLI_BIN, *args],
                           env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120)
        assert r.returncode != 99, f"{args}: {r.stderr}"
