"""Issue 14, finding 8: transport security. The server serves https:// and wss:// with
--tls-cert/--tls-key; agents verify it (--ca-file or --server-fingerprint) before they send their
token, the CLI verifies it (--ca-file / TRAINYARD_CA_FILE); plain HTTP to the TLS port fails
cleanly; --auth none listens on loopback unless --http-host says otherwise.

The certificates come from a throw-away CA made with the `openssl` command for each module."""
import json
import os
import socket
import subprocess
import time

import pytest

import harness

# What the agent logs when the server's certificate does not verify.
CERT_REFUSED = "certificate did not verify"
SPEC = {"name": "over-tls", "entrypoint": ["/bin/sh", "-c", "echo hello over tls"]}


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)
    return os.path.join(d, f"{name}.pem")


def make_cert(d, ca, name, san):
    """A certificate for `san` (e.g. "DNS:localhost,IP:127.0.0.1") signed by CA `ca`."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout",
            f"{name}.key", "-out", f"{name}.csr", cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem",
            cwd=d)
    return os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")


def fingerprint(cert):
    out = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-fingerprint", "-sha256"],
                         check=True, capture_output=True, text=True).stdout
    return "sha256:" + out.strip().split("=", 1)[1].replace(":", "").lower()


@pytest.fixture(scope="module")
def pki():
    d = harness.make_tmpdir("ty-pki-")
    ca = make_ca(d, "ca")
    other_ca = make_ca(d, "other-ca")
    good = make_cert(d, "ca", "server", "DNS:localhost,IP:127.0.0.1")
    ip_only = make_cert(d, "ca", "elsewhere", "IP:127.0.0.1")
    return {"ca": ca, "other_ca": other_ca, "good": good, "ip_only": ip_only}


@pytest.fixture
def tls_server(server_factory, pki):
    return server_factory(tls=(*pki["good"], pki["ca"]))


def wait_log(agent, text, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        log = agent.log_text()
        if text in log:
            return log
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in the agent's log:\n{agent.log_text()}")


def assert_refused(server, extra_args, why):
    """An agent started with extra_args logs `why`, never registers, the server has no node,
    and the agent still stops cleanly."""
    agent = harness.Agent(server, extra_args=extra_args).start(wait=False)
    try:
        log = wait_log(agent, why)
        assert "registered with" not in log, log
        assert server.request("GET", "/api/v1/nodes").json["nodes"] == []
    finally:
        assert agent.stop() == 0, agent.log_text()


def test_agent_and_cli_over_tls_run_a_job(tls_server, agent_factory, pki):
    assert tls_server.url.startswith("https://") and tls_server.ws_url.startswith("wss://")
    agent_factory(tls_server, extra_args=("--ca-file", pki["ca"]))
    env = {"TRAINYARD_CA_FILE": pki["ca"]}
    spec = os.path.join(harness.make_tmpdir("ty-spec-"), "job.json")
    with open(spec, "w") as f:
        json.dump(SPEC, f)
    r = harness.run_cli(tls_server, "submit", spec, env=env)
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    assert tls_server.wait_job(job_id, ("SUCCEEDED", "FAILED"))["status"] == "SUCCEEDED"
    r = harness.run_cli(tls_server, "logs", job_id, env=env)
    assert r.returncode == 0, r.stderr
    assert "hello over tls" in r.stdout


def test_cli_refuses_a_server_its_ca_does_not_vouch_for(tls_server, pki):
    r = harness.run_cli(tls_server, "list", env={"TRAINYARD_CA_FILE": pki["other_ca"]})
    assert r.returncode != 0
    assert "certificate" in r.stderr.lower(), r.stderr


def test_cli_follows_a_job_over_wss(tls_server, agent_factory, pki):
    agent_factory(tls_server, extra_args=("--ca-file", pki["ca"]))
    spec = dict(SPEC, entrypoint=["/bin/sh", "-c", "sleep 1; echo followed over wss"])
    job = tls_server.submit(spec)
    r = harness.run_cli(tls_server, "logs", str(job["id"]), "--follow",
                        env={"TRAINYARD_CA_FILE": pki["ca"]})
    assert r.returncode == 0, r.stderr
    assert "followed over wss" in r.stdout, r.stdout


def test_cli_follow_refuses_a_stream_whose_certificate_names_another_host(server_factory, pki):
    """The REST calls verify (right CA, 127.0.0.1); the stream is reached as localhost, which
    the server's certificate (127.0.0.1 only) does not name: the follow stops at once with the
    certificate named, instead of retrying or talking to an unverified peer."""
    server = server_factory(tls=(*pki["ip_only"], pki["ca"]))
    job = server.submit(SPEC)
    r = harness.run_cli(server, "events", str(job["id"]), "--follow",
                        env={"TRAINYARD_CA_FILE": pki["ca"],
                             "TRAINYARD_STREAM_URL": f"wss://localhost:{server.ws_port}/stream"})
    assert r.returncode != 0
    assert "certificate was refused" in r.stderr, r.stderr


def test_agent_with_a_wrong_ca_refuses_to_connect(tls_server, pki):
    assert_refused(tls_server, ("--ca-file", pki["other_ca"]), CERT_REFUSED)


def test_agent_refuses_a_certificate_for_another_name(server_factory, pki):
    # The certificate names 127.0.0.1 only (the test's requests use it); the agent asks for
    # localhost.
    server = server_factory(tls=(*pki["ip_only"], pki["ca"]))
    url = f"wss://localhost:{server.ws_port}"
    assert_refused(server, ("--server", url, "--ca-file", pki["ca"]), CERT_REFUSED)


def test_agent_with_the_pinned_fingerprint_joins(tls_server, agent_factory, pki):
    agent_factory(tls_server, extra_args=("--server-fingerprint", fingerprint(pki["good"][0])))


def test_agent_with_another_fingerprint_refuses(tls_server, pki):
    pin = fingerprint(pki["ip_only"][0])
    assert_refused(tls_server, ("--server-fingerprint", pin),
                   "is not the pinned --server-fingerprint")


def test_plain_http_to_the_tls_port_fails_cleanly(tls_server):
    with pytest.raises(OSError):
        harness.http("GET", f"http://127.0.0.1:{tls_server.port}/api/v1/health", timeout=10)
    with socket.create_connection(("127.0.0.1", tls_server.ws_port), timeout=10) as s:
        s.sendall(b"GET /agent HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
        try:
            reply = s.recv(4096)
        except ConnectionResetError:
            reply = b""
    assert not reply.startswith(b"HTTP/1.1"), reply
    # The server still serves TLS clients afterwards.
    assert tls_server.request("GET", "/api/v1/health").status == 200


def listening_addresses(port):
    """The IPv4 addresses a local socket listens on at `port` (from /proc/net/tcp)."""
    found = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if state == "0A" and int(p, 16) == port:
                found.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return found


def test_auth_none_listens_on_loopback_only(server_factory):
    s = server_factory(auth="none", host=None)
    assert listening_addresses(s.port) == {"127.0.0.1"}
    assert listening_addresses(s.ws_port) == {"127.0.0.1"}


def test_auth_none_listens_where_http_host_says(server_factory):
    s = server_factory(auth="none", host="0.0.0.0")
    assert listening_addresses(s.port) == {"0.0.0.0"}
    assert listening_addresses(s.ws_port) == {"0.0.0.0"}


def test_auth_token_listens_on_every_address_by_default(server_factory):
    s = server_factory(host=None)
    assert listening_addresses(s.port) == {"0.0.0.0"}
    assert listening_addresses(s.ws_port) == {"0.0.0.0"}


@pytest.mark.parametrize("trust", ["ca", "pin"])
def test_checkpoints_upload_over_https_with_the_agents_trust(tls_server, agent_factory, pki,
                                                           trust):
    """The agent's REST calls (checkpoint uploads) verify the server as its websocket does:
    against --ca-file, or the pinned certificate. The stored archive then downloads over TLS."""
    from test_checkpoints import PY, WORKER, wait_checkpoints
    flags = (("--ca-file", pki["ca"]) if trust == "ca" else
             ("--server-fingerprint", fingerprint(pki["good"][0])))
    agent_factory(tls_server, cpus=2, extra_args=flags)
    work = harness.make_tmpdir("ty-tls-ck-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WORKER)
    job = tls_server.submit({"name": f"tls-ck-{trust}", "entrypoint": [PY, "train.py"],
                             "working_dir": work, "scaling_config": {"num_workers": 2}})["id"]
    assert tls_server.wait_job(job, ("SUCCEEDED", "FAILED"))["status"] == "SUCCEEDED"
    deadline = time.time() + 30
    while time.time() < deadline:
        cks = wait_checkpoints(tls_server, job, 3)
        if [c["artifact"]["state"] for c in cks] == ["complete"] * 3:
            break
        time.sleep(0.2)
    assert [c["artifact"]["state"] for c in cks] == ["complete"] * 3, cks
    out = os.path.join(harness.make_tmpdir("ty-tls-dl-"), "ck")
    r = harness.run_cli(tls_server, "checkpoint", "download", str(cks[2]["id"]), out,
                        env={"TRAINYARD_CA_FILE": pki["ca"]})
    assert r.returncode == 0, r.stderr
    assert open(os.path.join(out, "rank-1.txt")).read() == "rank 1 round 3"
