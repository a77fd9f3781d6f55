"""Server start-up and shutdown: embedded PostgreSQL, restarts, concurrent migrations, config."""
import os
import stat
import subprocess
import threading

import pytest

import harness

SPEC = {"entrypoint": ["true"]}


def test_embedded_database_survives_restart():
    data = os.path.join(harness.make_tmpdir("ty-emb-"), "d")
    s = harness.Server(data_dir=data).start()
    try:
        token_file = os.path.join(data, "admin.token")
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        ids = [s.submit(SPEC)["id"] for _ in range(3)]
    finally:
        assert s.stop() == 0, s.log_text()
    # The embedded PostgreSQL stopped with the server.
    assert not os.path.exists(os.path.join(data, "postgres", "postmaster.pid"))
    s2 = harness.Server(data_dir=data)
    s2.start()
    try:
        assert s2.admin_token == s.admin_token
        listed = [j["id"] for j in s2.request("GET", "/api/v1/jobs").json["jobs"]]
        assert listed == sorted(ids, reverse=True)
    finally:
        assert s2.stop() == 0, s2.log_text()


def test_embedded_database_in_a_path_with_a_space_and_a_quote():
    data = os.path.join(harness.make_tmpdir("ty-emb-"), "my data's dir")
    s = harness.Server(data_dir=data).start()
    try:
        assert s.submit(SPEC)["id"] > 0
    finally:
        assert s.stop() == 0, s.log_text()
    assert os.path.exists(os.path.join(data, "postgres", "PG_VERSION"))


def _root_only():
    """These tests need root (the server then runs PostgreSQL as `postgres`). CI runs as root,
    so there a non-root run is a failure, not a skip."""
    if os.geteuid() != 0:
        assert not os.environ.get("CI"), "CI must run the suite as root"
        pytest.skip("needs root: PostgreSQL runs as the postgres user only when the server is root")


def _private_dir():
    """A directory only root can enter (as /root is), holding a working directory with a space."""
    private = harness.make_tmpdir("ty-private-")
    os.chmod(private, 0o700)
    cwd = os.path.join(private, "work dir")
    os.mkdir(cwd)
    return private, cwd


def test_embedded_database_moves_where_postgres_can_reach_it():
    _root_only()
    private, cwd = _private_dir()
    fallback = os.path.join(harness.make_tmpdir("ty-fallback-"), "pg")
    data = os.path.join(cwd, "data")
    args = ["--pg-fallback-dir", fallback]
    s = harness.Server(data_dir=data, cwd=cwd, extra_args=args).start()
    try:
        ids = [s.submit(SPEC)["id"] for _ in range(2)]
    finally:
        assert s.stop() == 0, s.log_text()
    with open(os.path.join(data, "postgres.location")) as f:
        home = f.read().strip()
    assert os.path.dirname(home) == fallback
    assert os.path.exists(os.path.join(home, "postgres", "PG_VERSION"))
    log = s.log_text()
    assert f"the postgres user cannot reach {data} ({private} is not searchable by it)" in log
    assert home in log
    # A restart finds the cluster through postgres.location, with the jobs in it.
    s2 = harness.Server(data_dir=data, cwd=cwd, extra_args=args).start()
    try:
        listed = [j["id"] for j in s2.request("GET", "/api/v1/jobs").json["jobs"]]
        assert listed == sorted(ids, reverse=True)
    finally:
        assert s2.stop() == 0, s2.log_text()


def test_embedded_database_refuses_clearly_without_fallback():
    _root_only()
    private, cwd = _private_dir()
    data = os.path.join(cwd, "data")
    s = harness.Server(data_dir=data, cwd=cwd, extra_args=["--pg-fallback-dir", "none"])
    s.start(wait=False)
    assert s.proc.wait(timeout=60) != 0
    errors = [line for line in s.log_text().splitlines() if " error " in line]
    assert len(errors) == 1, errors
    assert f"the postgres user cannot reach the data directory {data}" in errors[0]
    assert "--data-dir" in errors[0] and "--database-url" in errors[0]
    assert not os.path.exists(os.path.join(data, "postgres"))


def test_postgres_errors_are_copied_into_the_server_log():
    """A PostgreSQL tool that fails explains itself in the server's own log."""
    _root_only()
    data = os.path.join(harness.make_tmpdir("ty-pgfail-"), "d")
    os.makedirs(os.path.join(data, "postgres"))
    # A data directory that is not a cluster but is not empty either: initdb refuses it.
    with open(os.path.join(data, "postgres", "stray"), "w") as f:
        f.write("x")
    s = harness.Server(data_dir=data)
    s.start(wait=False)
    assert s.proc.wait(timeout=60) != 0
    log = s.log_text()
    assert "postgres: initdb: error: directory" in log and "exists but is not empty" in log, log
    assert "initdb " + os.path.join(data, "postgres") + " failed" in log


def test_two_servers_starting_together_apply_migrations_once(database, pg):
    servers = [harness.Server(database_url=database) for _ in range(2)]
    threads = [threading.Thread(target=s.start) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        db = database.split("dbname=")[1].split()[0]
        assert pg.psql("SELECT count(*) FROM schema_migrations", db=db) == str(
            len([f for f in os.listdir(os.path.join(harness.SOURCE_DIR, "migrations"))
                 if f.endswith(".sql")]))
        assert pg.psql("SELECT count(*) FROM api_tokens WHERE role = 'admin'", db=db) == "1"
        for s in servers:
            assert s.request("GET", "/api/v1/health", token=None).status == 200
    finally:
        for s in servers:
            assert s.stop() == 0, s.log_text()


@pytest.mark.own_postgres
def test_server_reconnects_after_database_restart(server, pg):
    job = server.submit(SPEC)
    subprocess.run([os.path.join(pg.bindir, "pg_ctl"), "restart", "-D", pg.pgdata, "-m", "fast",
                    "-w"], check=True, stdout=subprocess.DEVNULL,
                   preexec_fn=_demote if os.geteuid() == 0 else None)
    r = server.request("GET", f"/api/v1/jobs/{job['id']}")
    assert r.status == 200 and r.json["id"] == job["id"]


def _demote():
    import pwd
    pw = pwd.getpwnam("postgres")
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


def test_help_lists_every_option_with_its_variable():
    out = subprocess.run([harness.SERVER_BIN, "--help"], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    for flag, env in [("--http-port", "TRAINYARD_HTTP_PORT"),
                      ("--database-url", "TRAINYARD_DATABASE_URL"),
                      ("--data-dir", "TRAINYARD_DATA_DIR"), ("--auth", "TRAINYARD_AUTH")]:
        assert flag in out and env in out


def test_bad_option_value_is_rejected_with_message():
    r = subprocess.run([harness.SERVER_BIN, "--http-port", "99999"], stderr=subprocess.PIPE,
                       text=True)
    assert r.returncode != 0 and "99999" in r.stderr
    r = subprocess.run([harness.SERVER_BIN, "--frobnicate"], stderr=subprocess.PIPE, text=True)
    assert r.returncode != 0 and "--frobnicate" in r.stderr


def test_environment_variable_configures_option(database):
    s = harness.Server(database_url=database, env={"TRAINYARD_MAX_BODY_BYTES": "2048"}).start()
    try:
        r = s.request("POST", "/api/v1/jobs", {"entrypoint": "x", "name": "y" * 100,
                                                "metadata": {"k": "v" * 3000}})
        assert r.status == 413
    finally:
        assert s.stop() == 0
