"""Server start-up and shutdown: embedded PostgreSQL, restarts, concurrent migrations, config."""
import os
import stat
import subprocess
import threading

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
