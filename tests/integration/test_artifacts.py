"""The artifact store (issue 11): agents upload each node's merged checkpoint directory, packed as
one tar, in chunks to the server, which verifies each chunk's and the whole part's SHA-256 and
marks the checkpoint's artifact complete only once every node's part is stored. Real server and
agent; the uploads are made here with the agent's own node credential, as the agent will."""
import hashlib
import io
import os
import socket
import tarfile
import textwrap
import time
import urllib.request

import pytest

import harness
from test_checkpoints import PY, WORKER, submit, wait_checkpoints

CHUNK = 64 * 1024


def node_credential(agent):
    with open(os.path.join(agent.data_dir, "node.credential")) as f:
        return f.read().strip()


def part_url(job, attempt, idx, suffix=""):
    return f"/api/v1/agent/checkpoints/{job}/{attempt}/{idx}/part{suffix}"


def node_request(srv, agent, method, path, body=None, headers=None, credential=None):
    h = {"X-Trainyard-Node": agent.node_id}
    h.update(headers or {})
    cred = node_credential(agent) if credential is None else credential
    return srv.request(method, path, body=body, token=cred, headers=h)


def pack(directory):
    """The part as the agent sends it: a tar of the merged directory, names relative to it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for root, dirs, files in os.walk(directory):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                tar.add(full, arcname=os.path.relpath(full, directory), recursive=False)
    nfiles = sum(len(f) for _, _, f in os.walk(directory))
    return buf.getvalue(), nfiles


def put_chunk(srv, agent, job, idx, offset, chunk, sha=None):
    return node_request(srv, agent, "PUT", part_url(job, 1, idx) + f"?offset={offset}", chunk,
                        {"X-Content-SHA256": sha or hashlib.sha256(chunk).hexdigest(),
                         "Content-Type": "application/octet-stream"})


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    """CRC32C (Castagnoli) of data, as the X-Chunk-CRC32C header carries it (8 hex digits)."""
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return "%08x" % (c ^ 0xFFFFFFFF)


def put_chunk_crc(srv, agent, job, idx, offset, chunk, crc):
    return node_request(srv, agent, "PUT", part_url(job, 1, idx) + f"?offset={offset}", chunk,
                        {"X-Chunk-CRC32C": crc, "Content-Type": "application/octet-stream"})


def upload(srv, agent, job, idx, data, start=0):
    off = start
    while off < len(data):
        r = put_chunk(srv, agent, job, idx, off, data[off:off + CHUNK])
        assert r.status == 200, r
        off = r.json["offset"]
    return off


def finished_job(srv, agent_factory):
    # The agent's own uploader is off: these tests upload by hand, as it would.
    agent = agent_factory(srv, cpus=2, env={"TRAINYARD_API_URL": "none"})
    job = submit(srv, WORKER, "artifacts")
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    cks = wait_checkpoints(srv, job, 3)
    assert len(cks) == 3
    return agent, job, cks


def artifact(srv, job, idx):
    cks = wait_checkpoints(srv, job, 3)
    return next(c for c in cks if c["index"] == idx)["artifact"]


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs."""
    return module_server_factory()


def test_part_upload_in_chunks_is_verified_and_completes_the_checkpoint(server, agent_factory):
    srv = server
    agent, job, cks = finished_job(srv, agent_factory)
    ck = cks[0]
    data, nfiles = pack(ck["location"][0]["path"])
    data += b"\0" * (3 * CHUNK)  # several chunks
    assert artifact(srv, job, 1)["state"] is None

    r = node_request(srv, agent, "GET", part_url(job, 1, 1))
    assert r.status == 200 and r.json == {"state": "uploading", "offset": 0}, r
    half = upload(srv, agent, job, 1, data[:2 * CHUNK])
    assert half == 2 * CHUNK
    # The API's progress is recorded at the first chunk and then every 64 MiB (one database
    # write per step, not per chunk); the resume point above is the staged size itself.
    a = artifact(srv, job, 1)
    assert a["state"] == "uploading" and a["uploaded_bytes"] == CHUNK, a
    upload(srv, agent, job, 1, data, start=half)

    sha = hashlib.sha256(data).hexdigest()
    r = node_request(srv, agent, "POST", part_url(job, 1, 1, "/complete"),
                     {"sha256": sha, "file_count": nfiles})
    assert r.status == 200 and r.json == {"state": "complete", "offset": len(data)}, r
    a = artifact(srv, job, 1)
    assert a["state"] == "complete" and a["file_count"] == nfiles == 4, a
    assert a["sha256"] == hashlib.sha256(sha.encode()).hexdigest()
    stored = os.path.join(srv.data_dir, "artifacts", "sha256", sha[:2], sha)
    with open(stored, "rb") as f:
        assert f.read() == data
    assert os.listdir(os.path.join(srv.data_dir, "artifacts", "uploads")) == []
    # Completing again is idempotent; other checkpoints are untouched.
    r = node_request(srv, agent, "POST", part_url(job, 1, 1, "/complete"),
                     {"sha256": sha, "file_count": nfiles})
    assert r.status == 200 and r.json["state"] == "complete", r
    assert artifact(srv, job, 2)["state"] is None


def test_upload_progress_shows_at_the_first_chunk_and_every_64_mib(server, agent_factory):
    srv = server
    agent, job, cks = finished_job(srv, agent_factory)
    mib = 1 << 20
    data = os.urandom(4 * mib) * 17  # 68 MiB, in chunks of 4 MiB
    progress = []
    for off in range(0, len(data), 4 * mib):
        r = put_chunk(srv, agent, job, 1, off, data[off:off + 4 * mib])
        assert r.status == 200 and r.json["offset"] == off + 4 * mib, r
        progress.append(artifact(srv, job, 1)["uploaded_bytes"])
    assert progress == [4 * mib] * 15 + [64 * mib] * 2, progress
    r = node_request(srv, agent, "POST", part_url(job, 1, 1, "/complete"),
                     {"sha256": hashlib.sha256(data).hexdigest(), "file_count": 1})
    assert r.status == 200 and r.json["state"] == "complete", r
    assert artifact(srv, job, 1)["uploaded_bytes"] == len(data)


def test_upload_cut_mid_stream_resumes_after_a_server_restart(server_factory, agent_factory):
    # Its own server: a restarted server takes the nodes of the tests before for alive until
    # their heartbeats time out.
    srv = server_factory()
    agent, job, cks = finished_job(srv, agent_factory)
    data = os.urandom(5 * CHUNK + 123)
    got = upload(srv, agent, job, 2, data[:3 * CHUNK])
    srv.stop()
    srv.start()
    agent.wait_node()
    r = node_request(srv, agent, "GET", part_url(job, 1, 2))
    assert r.status == 200 and r.json == {"state": "uploading", "offset": got}, r
    # A chunk resent at an old offset is refused with the resume point, not appended twice.
    r = put_chunk(srv, agent, job, 2, 0, data[:CHUNK])
    assert r.status == 409 and str(got) in r.json["detail"], r
    upload(srv, agent, job, 2, data, start=got)
    r = node_request(srv, agent, "POST", part_url(job, 1, 2, "/complete"),
                     {"sha256": hashlib.sha256(data).hexdigest(), "file_count": 4})
    assert r.status == 200 and r.json["state"] == "complete", r
    assert artifact(srv, job, 2)["state"] == "complete"


def test_corrupted_chunk_and_corrupted_part_are_refused(server, agent_factory):
    srv = server
    agent, job, cks = finished_job(srv, agent_factory)
    data = os.urandom(2 * CHUNK)
    chunk = bytearray(data[:CHUNK])
    good_sha = hashlib.sha256(bytes(chunk)).hexdigest()
    chunk[100] ^= 0xFF  # flipped in transit
    r = put_chunk(srv, agent, job, 3, 0, bytes(chunk), sha=good_sha)
    assert r.status == 422 and r.json["type"].endswith("upload-corrupt"), r
    r = node_request(srv, agent, "GET", part_url(job, 1, 3))
    assert r.json["offset"] == 0, r

    # Chunks that each verify but do not add up to the declared part: discarded, never complete.
    upload(srv, agent, job, 3, data)
    r = node_request(srv, agent, "POST", part_url(job, 1, 3, "/complete"),
                     {"sha256": hashlib.sha256(data + b"x").hexdigest(), "file_count": 4})
    assert r.status == 422, r
    assert artifact(srv, job, 3)["state"] == "uploading"
    r = node_request(srv, agent, "GET", part_url(job, 1, 3))
    assert r.json == {"state": "uploading", "offset": 0}, r
    upload(srv, agent, job, 3, data)
    r = node_request(srv, agent, "POST", part_url(job, 1, 3, "/complete"),
                     {"sha256": hashlib.sha256(data).hexdigest(), "file_count": 4})
    assert r.status == 200, r
    assert artifact(srv, job, 3)["state"] == "complete"


def part_status_once(srv, agent, job, idx, status, timeout=30):
    """GETs the part's upload status until it answers `status` (or the timeout): the last reply."""
    deadline = time.time() + timeout
    while True:
        r = node_request(srv, agent, "GET", part_url(job, 1, idx))
        if r.status == status or time.time() > deadline:
            return r
        time.sleep(0.05)


def test_a_chunk_cut_mid_body_leaves_no_bytes_and_others_wait_for_it_as_busy(server,
                                                                              agent_factory):
    """The server writes a chunk as it arrives. A PUT whose connection closes halfway through its
    body leaves none of its bytes (on disk or in the part's running SHA-256); while it is open,
    other requests on the same part are told 409 upload-busy at once instead of waiting."""
    srv = server
    agent, job, cks = finished_job(srv, agent_factory)
    mib = 1 << 20
    data = os.urandom(3 * mib + 5)  # several of the server's write blocks
    r = put_chunk_crc(srv, agent, job, 2, 0, data[:mib], crc32c(data[:mib]))
    assert r.status == 200 and r.json["offset"] == mib, r
    rest = data[mib:]
    head = (f"PUT {part_url(job, 1, 2)}?offset={mib} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"X-Trainyard-Node: {agent.node_id}\r\n"
            f"Authorization: Bearer {node_credential(agent)}\r\n"
            f"X-Chunk-CRC32C: {crc32c(rest)}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {len(rest)}\r\n\r\n").encode()
    cut = socket.create_connection(("127.0.0.1", srv.port))
    try:
        cut.sendall(head + rest[:3 * mib // 2])
        r = part_status_once(srv, agent, job, 2, 409)
        assert r.status == 409 and r.json["type"].endswith("upload-busy"), r
        r = put_chunk_crc(srv, agent, job, 2, mib, rest, crc32c(rest))
        assert r.status == 409 and r.json["type"].endswith("upload-busy"), r
    finally:
        cut.close()
    r = part_status_once(srv, agent, job, 2, 200)
    assert r.status == 200 and r.json == {"state": "uploading", "offset": mib}, r
    r = put_chunk_crc(srv, agent, job, 2, mib, rest, crc32c(rest))
    assert r.status == 200 and r.json["offset"] == len(data), r
    r = node_request(srv, agent, "POST", part_url(job, 1, 2, "/complete"),
                     {"sha256": hashlib.sha256(data).hexdigest(), "file_count": 4})
    assert r.status == 200 and r.json["state"] == "complete", r


def test_chunks_checked_by_crc32c_reject_corruption_and_bad_headers(server, agent_factory):
    srv = server
    agent, job, cks = finished_job(srv, agent_factory)
    assert crc32c(b"123456789") == "e3069283"  # the standard check value
    data = os.urandom(2 * CHUNK)
    chunk = bytearray(data[:CHUNK])
    good = crc32c(bytes(chunk))
    chunk[100] ^= 0xFF  # flipped in transit
    r = put_chunk_crc(srv, agent, job, 3, 0, bytes(chunk), good)
    assert r.status == 422 and r.json["type"].endswith("upload-corrupt"), r
    for bad in ["E3069283", "e306928", "e30692830", "zz069283", ""]:
        r = put_chunk_crc(srv, agent, job, 3, 0, data[:CHUNK], bad)
        assert r.status == 400 and r.json["errors"][0]["field"] == "X-Chunk-CRC32C", (bad, r)
    r = node_request(srv, agent, "PUT", part_url(job, 1, 3) + "?offset=0", data[:CHUNK],
                     {"Content-Type": "application/octet-stream"})
    assert r.status == 400 and r.json["errors"][0]["field"] == "X-Chunk-CRC32C", r
    r = node_request(srv, agent, "GET", part_url(job, 1, 3))
    assert r.json["offset"] == 0, r

    # CRC32C chunks and SHA-256 chunks mix; the part's SHA-256 is still checked end to end.
    r = put_chunk_crc(srv, agent, job, 3, 0, data[:CHUNK], good)
    assert r.status == 200 and r.json["offset"] == CHUNK, r
    r = put_chunk(srv, agent, job, 3, CHUNK, data[CHUNK:])
    assert r.status == 200 and r.json["offset"] == 2 * CHUNK, r
    r = node_request(srv, agent, "POST", part_url(job, 1, 3, "/complete"),
                     {"sha256": hashlib.sha256(data).hexdigest(), "file_count": 4})
    assert r.status == 200, r
    assert artifact(srv, job, 3)["state"] == "complete"


def test_uploads_need_the_node_credential_and_a_node_of_the_attempt(server, agent_factory):
    srv = server
    agent, job, cks = finished_job(srv, agent_factory)
    r = node_request(srv, agent, "GET", part_url(job, 1, 1), credential=srv.admin_token)
    assert r.status == 401, r
    r = srv.request("GET", part_url(job, 1, 1), token=node_credential(agent),
                    headers={"X-Trainyard-Node": "some-other-node"})
    assert r.status == 401, r
    r = node_request(srv, agent, "GET", part_url(job, 2, 1))
    assert r.status == 403, r


def wait_artifacts(srv, job, n, timeout=20):
    deadline = time.time() + timeout
    cks = []
    while time.time() < deadline:
        cks = wait_checkpoints(srv, job, n)
        if len(cks) >= n and all(c["artifact"]["state"] == "complete" for c in cks):
            return cks
        time.sleep(0.2)
    return cks


def agent_queue_empties(agent, timeout=10):
    """The agent's upload queue (its part markers) once empty, or what is left at the timeout.
    The agent drops a part's marker when it has the server's reply to the last chunk, which may
    come just after the server shows the part complete."""
    uploads = os.path.join(agent.data_dir, "uploads")
    deadline = time.time() + timeout
    while os.listdir(uploads) and time.time() < deadline:
        time.sleep(0.1)
    return os.listdir(uploads)


def test_agent_uploads_each_checkpoint_in_the_background(server_factory, agent_factory):
    srv = server_factory()  # its own: the test reads every part in the store
    agent = agent_factory(srv, cpus=2)
    job = submit(srv, WORKER, "artifacts-agent")
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    cks = wait_artifacts(srv, job, 3)
    assert [c["artifact"]["state"] for c in cks] == ["complete"] * 3, (cks, agent.log_text())
    for c in cks:
        assert c["artifact"]["file_count"] == 4, c
        # The stored part is a tar of exactly what the workers wrote.
        parts = [f for d, _, fs in os.walk(os.path.join(srv.data_dir, "artifacts", "sha256"))
                 for f in fs]
        found = None
        for name in parts:
            path = os.path.join(srv.data_dir, "artifacts", "sha256", name[:2], name)
            with tarfile.open(path) as tar:
                files = {os.path.normpath(m.name): tar.extractfile(m).read()
                         for m in tar.getmembers() if m.isfile()}
            if files.get("rank-0.txt") == f"rank 0 round {c['index']}".encode():
                found = files
        assert found == {
            "rank-0.txt": f"rank 0 round {c['index']}".encode(),
            "rank-1.txt": f"rank 1 round {c['index']}".encode(),
            "sub/part-0.bin": b"x" * 100, "sub/part-1.bin": b"x" * 200}, found
    assert agent_queue_empties(agent) == []


BIG_WORKER = textwrap.dedent("""
    import os, shutil, tempfile
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    d = tempfile.mkdtemp(prefix=f"ty-big-{rank}-")
    with open(os.path.join(d, f"weights-{rank}.bin"), "wb") as f:
        f.write(os.urandom(24 * 1024 * 1024 + rank))  # 3 of the agent's 16 MiB chunks per node
    trainyard.report({"loss": 1.0}, checkpoint=d)
    shutil.rmtree(d)
""")


class FlakyProxy(harness.HttpProxy):
    """Forwards HTTP to the server, but loses the 2nd PUT before the server sees it and the
    reply to the 4th after the server stored it: the agent must resume at the server's offset."""

    def before(self, method, number, body):
        return self.DROP if method == "PUT" and number == 2 else body

    def after(self, method, number):
        return not (method == "PUT" and number == 4)


def test_agent_upload_resumes_after_lost_chunks_and_lost_replies(server_factory, agent_factory):
    srv = server_factory()  # its own: the test reads the store's one part
    proxy = FlakyProxy(srv.url)
    try:
        agent = agent_factory(srv, cpus=2, env={"TRAINYARD_API_URL": proxy.url})
        job = submit(srv, BIG_WORKER, "artifacts-flaky")
        done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", done
        cks = wait_artifacts(srv, job, 1)
        assert cks[0]["artifact"]["state"] == "complete", (cks, agent.log_text())
        assert proxy.puts >= 4  # 3 chunks of 16 MiB, plus the resend of the lost one
    finally:
        proxy.close()
    merged = cks[0]["location"][0]["path"]
    sha = None
    for d, _, fs in os.walk(os.path.join(srv.data_dir, "artifacts", "sha256")):
        for f in fs:
            sha = f
    with tarfile.open(os.path.join(srv.data_dir, "artifacts", "sha256", sha[:2], sha)) as tar:
        files = {os.path.normpath(m.name): tar.extractfile(m).read()
                 for m in tar.getmembers() if m.isfile()}
    assert sorted(files) == ["weights-0.bin", "weights-1.bin"]
    for name, content in files.items():
        with open(os.path.join(merged, name), "rb") as f:
            assert f.read() == content


def untar(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {os.path.normpath(m.name): tar.extractfile(m).read()
                for m in tar.getmembers() if m.isfile()}


def test_archive_download_round_trip_and_range_resume(server, agent_factory):
    srv = server
    agent = agent_factory(cpus=2)
    job = submit(srv, WORKER, "artifacts-download")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    cks = wait_artifacts(srv, job, 3)
    viewer = srv.create_token("dl-viewer", "viewer")
    for c in cks:
        meta = srv.request("GET", f"/api/v1/checkpoints/{c['id']}", token=viewer)
        assert meta.status == 200, meta
        assert meta.json["job_id"] == job and meta.json["index"] == c["index"]
        assert meta.json["artifact"]["state"] == "complete"
        assert [p["node_id"] for p in meta.json["artifact"]["parts"]] == [agent.node_id]
        r = harness.http("GET", srv.url + f"/api/v1/checkpoints/{c['id']}/archive", token=viewer)
        assert r.status == 200 and r.headers["Content-Type"] == "application/x-tar", r
        raw = urllib.request.urlopen(urllib.request.Request(
            srv.url + f"/api/v1/checkpoints/{c['id']}/archive",
            headers={"Authorization": f"Bearer {viewer}"})).read()
        k = c["index"]
        assert untar(raw) == {
            "rank-0.txt": f"rank 0 round {k}".encode(), "rank-1.txt": f"rank 1 round {k}".encode(),
            "sub/part-0.bin": b"x" * 100, "sub/part-1.bin": b"x" * 200}
        # A download cut at byte 700 resumes with Range and yields the same bytes.
        req = urllib.request.Request(srv.url + f"/api/v1/checkpoints/{c['id']}/archive",
                                     headers={"Authorization": f"Bearer {viewer}",
                                              "Range": "bytes=700-"})
        with urllib.request.urlopen(req) as resp:
            assert resp.status == 206
            assert resp.headers["Content-Range"] == f"bytes 700-{len(raw) - 1}/{len(raw)}"
            assert raw[:700] + resp.read() == raw
    r = srv.request("GET", f"/api/v1/checkpoints/{cks[0]['id']}/archive",
                    headers={"Range": "bytes=99999999-"})
    assert r.status == 416, r
    assert srv.request("GET", "/api/v1/checkpoints/999999").status == 404
    assert srv.request("GET", f"/api/v1/checkpoints/{cks[0]['id']}", token=None).status == 401


def test_archive_of_a_checkpoint_not_yet_uploaded_is_409(server, agent_factory):
    srv = server
    agent, job, cks = finished_job(srv, agent_factory)
    r = srv.request("GET", f"/api/v1/checkpoints/{cks[0]['id']}/archive")
    assert r.status == 409 and r.json["type"].endswith("archive-not-ready"), r
    meta = srv.request("GET", f"/api/v1/checkpoints/{cks[0]['id']}").json
    assert meta["artifact"]["state"] is None and meta["artifact"]["parts"] == []


def test_cli_lists_checkpoints_and_downloads_one(server, agent_factory):
    srv = server
    agent_factory(cpus=2)
    job = submit(srv, WORKER, "artifacts-cli")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    cks = wait_artifacts(srv, job, 3)
    r = harness.run_cli(srv, "checkpoints", str(job))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:6] == ["ID", "ATTEMPT", "INDEX", "STEP", "SIZE", "STORED"]
    assert [ln.split()[5] for ln in lines[1:]] == ["complete"] * 3
    # The job's latest checkpoint, metrics nested in it: rank 0's last loss 1/3 reads as the
    # shortest text that is that double, not JSON's 17 digits (0.33333333333333331).
    r = harness.run_cli(srv, "get", str(job))
    assert r.returncode == 0, r.stderr
    latest = next(ln for ln in r.stdout.splitlines() if ln.startswith("latest_checkpoint"))
    assert '"loss":0.3333333333333333' in latest and "333331" not in r.stdout, r.stdout
    out = os.path.join(harness.make_tmpdir("ty-dl-"), "ck")
    r = harness.run_cli(srv, "checkpoint", "download", str(cks[1]["id"]), out)
    assert r.returncode == 0, r.stderr
    got = {os.path.relpath(os.path.join(d, f), out): open(os.path.join(d, f), "rb").read()
           for d, _, fs in os.walk(out) for f in fs}
    assert got == {"rank-0.txt": b"rank 0 round 2", "rank-1.txt": b"rank 1 round 2",
                   "sub/part-0.bin": b"x" * 100, "sub/part-1.bin": b"x" * 200}
    r = harness.run_cli(srv, "checkpoint", "download", "999999", out)
    assert r.returncode == 1
    assert "999999" in r.stderr or "not found" in r.stderr.lower(), r.stderr
    assert not [f for f in os.listdir(out) if f.startswith(".trainyard-checkpoint")]


class CuttingProxy(harness.TcpProxy):
    """A TCP proxy in front of the server that cuts its first connection after `cut` bytes of
    the server's reply, and passes every later one through whole."""

    def __init__(self, port, cut):
        self.cut = cut
        super().__init__(("127.0.0.1", port))

    def relay(self, number, client, upstream):
        self.spawn(self.pipe, client, upstream)
        self.spawn(self.pipe, upstream, client, self.cut if number == 1 else None)


def test_cli_download_cut_midway_resumes_with_range(server, agent_factory):
    srv = server
    agent_factory(cpus=2)
    job = submit(srv, WORKER, "artifacts-cli-resume")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    cks = wait_artifacts(srv, job, 3)
    whole = urllib.request.urlopen(urllib.request.Request(
        srv.url + f"/api/v1/checkpoints/{cks[1]['id']}/archive",
        headers={"Authorization": f"Bearer {srv.admin_token}"})).read()
    assert len(whole) > 2048
    proxy = CuttingProxy(srv.port, cut=1500)
    out = os.path.join(harness.make_tmpdir("ty-dl-"), "ck")
    r = harness.run_cli(srv, "checkpoint", "download", str(cks[1]["id"]), out,
                        env={"TRAINYARD_SERVER": proxy.url})
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stderr, r.stderr
    assert proxy.connections >= 2
    assert open(os.path.join(out, "sub", "part-1.bin"), "rb").read() == b"x" * 200
    assert open(os.path.join(out, "rank-1.txt"), "rb").read() == b"rank 1 round 2"


def test_resume_on_a_node_without_a_copy_fetches_it_once(server, agent_factory):
    from test_resume import READER, WRITER, run_script, seen
    srv = server
    a = agent_factory(cpus=2)
    first, _, done = run_script(srv, WRITER, "resume-a", 2)
    assert done["status"] == "SUCCEEDED", done
    [ck] = wait_artifacts(srv, first, 1)
    assert ck["artifact"]["state"] == "complete", ck
    assert ck["location"][0]["node_id"] == a.node_id
    # Node A stays up but takes no new work: the resumed jobs must run on B.
    assert srv.request("POST", f"/api/v1/nodes/{a.node_id}/drain").status == 200
    b = agent_factory(cpus=2)  # another node: its own data directory, no copy
    expect = {"rank-0.txt": b"weights of rank 0".hex(), "rank-1.txt": b"weights of rank 1".hex(),
              "sub/part-0.bin": (b"\x00" * 10).hex(), "sub/part-1.bin": (b"\x01" * 20).hex()}
    fetched = os.path.join(os.path.realpath(b.data_dir), "checkpoints", "fetched",
                           ck["artifact"]["sha256"])
    for name in ("resume-b1", "resume-b2"):
        second, work, done = run_script(srv, READER, name, 2, resume_from_checkpoint=ck["id"])
        assert done["status"] == "SUCCEEDED", (done, b.log_text())
        for rank in (0, 1):
            s = seen(work, rank)
            assert s["env"] == fetched and s["files"] == expect, (s, b.log_text())
        msgs = [e["message"] or "" for e in
                srv.request("GET", f"/api/v1/jobs/{second}/events").json["events"]]
        assert not any("holds no copy" in m for m in msgs), msgs
    assert b.log_text().count("fetched from the server") == 1, b.log_text()


def test_job_result_names_the_best_checkpoint_by_its_score(server, agent_factory):
    srv = server
    agent_factory(cpus=2)
    # WORKER reports loss 1/k + rank: rank 0's losses are 1, 0.5, 0.333 for k = 1, 2, 3.
    work = harness.make_tmpdir("ty-best-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WORKER)
    for order, best_index in (("min", 3), ("max", 1)):
        job = srv.submit({"name": f"best-{order}", "entrypoint": ["/usr/bin/python3", "train.py"],
                          "working_dir": work, "scaling_config": {"num_workers": 2},
                          "run_config": {"checkpoint_config": {
                              "checkpoint_score_attribute": "loss",
                              "checkpoint_score_order": order}}})["id"]
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        cks = wait_checkpoints(srv, job, 3)
        result = srv.request("GET", f"/api/v1/jobs/{job}").json["result"]
        best = next(c for c in cks if c["index"] == best_index)
        assert result["best_checkpoint"]["id"] == best["id"], (order, result, cks)
        assert result["latest_checkpoint"]["id"] == cks[-1]["id"]
    job = submit(srv, WORKER, "best-none")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    wait_checkpoints(srv, job, 3)
    assert srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["best_checkpoint"] is None


RETAINED = textwrap.dedent("""
    import os, shutil, tempfile
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    # Round k's loss and contents: round 4 holds the same bytes as round 1.
    for k, loss, content in ((1, 0.5, "A"), (2, 0.2, "B"), (3, 0.4, "C"), (4, 0.3, "A")):
        d = tempfile.mkdtemp(prefix=f"ty-keep-{rank}-")
        with open(os.path.join(d, f"rank-{rank}.txt"), "w") as f:
            f.write(f"weights {content}")
        trainyard.report({"loss": loss, "step": k}, checkpoint=d)
        shutil.rmtree(d)
""")


def test_num_to_keep_deletes_all_but_the_best_and_the_latest(server, agent_factory):
    """num_to_keep 1 by lowest loss: round 2 (best) and round 4 (latest) stay; rounds 1 and 3 are
    deleted, and their bytes leave the artifact store unless a kept checkpoint shares them."""
    srv = server
    agent_factory(cpus=2)
    work = harness.make_tmpdir("ty-keep-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(RETAINED)
    job = srv.submit({"name": "keep-one", "entrypoint": [PY, "train.py"],
                      "working_dir": work, "scaling_config": {"num_workers": 2},
                      "run_config": {"checkpoint_config": {
                          "num_to_keep": 1, "checkpoint_score_attribute": "loss",
                          "checkpoint_score_order": "min"}}})["id"]
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    want = ["deleted", "complete", "deleted", "complete"]
    deadline = time.time() + 30
    while time.time() < deadline:
        cks = wait_checkpoints(srv, job, 4)
        if [c["artifact"]["state"] for c in cks] == want:
            break
        time.sleep(0.2)
    assert [c["artifact"]["state"] for c in cks] == want, cks

    def sha(ck):
        parts = srv.request("GET", f"/api/v1/checkpoints/{ck['id']}").json["artifact"]["parts"]
        assert len(parts) == 1, parts
        return parts[0]["sha256"]

    def stored(ck):
        h = sha(ck)
        return os.path.exists(os.path.join(srv.data_dir, "artifacts", "sha256", h[:2], h))

    # A deleted checkpoint's object goes, unless a kept one is stored under the same address
    # (rounds 1 and 4 pack to the same bytes when their files' times agree to the second).
    kept = {sha(c) for c in cks if c["artifact"]["state"] == "complete"}
    assert [stored(c) for c in cks] == [c["artifact"]["state"] == "complete" or sha(c) in kept
                                        for c in cks]
    assert not stored(cks[2]) and stored(cks[1]) and stored(cks[3])
    gone = srv.request("GET", f"/api/v1/checkpoints/{cks[2]['id']}/archive")
    assert gone.status == 410 and "num_to_keep" in gone.json["detail"], gone
    kept = srv.request("GET", f"/api/v1/checkpoints/{cks[0]['id']}/archive")
    assert kept.status == 410
    assert srv.request("GET", f"/api/v1/checkpoints/{cks[3]['id']}/archive").status == 200
    result = srv.request("GET", f"/api/v1/jobs/{job}").json["result"]
    assert result["best_checkpoint"]["id"] == cks[1]["id"]
    assert result["latest_checkpoint"]["id"] == cks[3]["id"]


def submit_retained(srv, name):
    work = harness.make_tmpdir("ty-keep-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(RETAINED)
    return srv.submit({"name": name, "entrypoint": [PY, "train.py"],
                       "working_dir": work, "scaling_config": {"num_workers": 2},
                       "run_config": {"checkpoint_config": {
                           "num_to_keep": 1, "checkpoint_score_attribute": "loss",
                           "checkpoint_score_order": "min"}}})["id"]


def round_dirs(agent, job, cks):
    """Each checkpoint's staging directory on the agent (under its data dir)."""
    dirs = []
    for c in cks:
        [loc] = c["location"]
        path = os.path.join(agent.data_dir, "checkpoints", str(job), str(c["attempt"]),
                            str(c["index"]))
        assert os.path.realpath(loc["path"]) == os.path.realpath(path), (loc, path)
        dirs.append(path)
    return dirs


def wait_staging(dirs, want, timeout=30, exists=os.path.isdir):
    """Polls until [exists(d)] equals want (or the time is up); returns what it saw."""
    deadline = time.time() + timeout
    seen = [exists(d) for d in dirs]
    while seen != want and time.time() < deadline:
        time.sleep(0.2)
        seen = [exists(d) for d in dirs]
    return seen


def test_num_to_keep_removes_the_agents_staging_copies(server, agent_factory):
    """Rounds 1 and 3 deleted by num_to_keep go from the agent's data dir (`checkpoint_delete`),
    with their owners files; the kept rounds 2 and 4 stay."""
    srv = server
    agent = agent_factory(cpus=2)
    job = submit_retained(srv, "keep-staging")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    want = ["deleted", "complete", "deleted", "complete"]
    deadline = time.time() + 30
    cks = wait_checkpoints(srv, job, 4)
    while [c["artifact"]["state"] for c in cks] != want and time.time() < deadline:
        time.sleep(0.2)
        cks = wait_checkpoints(srv, job, 4)
    assert [c["artifact"]["state"] for c in cks] == want, cks
    dirs = round_dirs(agent, job, cks)
    assert wait_staging(dirs, [False, True, False, True]) == [False, True, False, True], \
        agent.log_text()
    # The agent removes a round's directory, then its owners file: wait for both.
    owners = [d + ".owners.json" for d in dirs]
    assert wait_staging(owners, [False, True, False, True], exists=os.path.exists) == \
        [False, True, False, True]
    assert "deleted by retention" in agent.log_text()


def test_an_agent_away_at_the_deletion_removes_the_copies_when_it_returns(server, agent_factory):
    """The agent is stopped before retention deletes anything (its uploader is off; the parts are
    uploaded here with its credential, as it would): the deleted rounds' staging copies stay
    while it is away and go when it registers again; the kept ones remain."""
    srv = server
    agent = agent_factory(cpus=2, env={"TRAINYARD_API_URL": "none"})
    job = submit_retained(srv, "keep-away")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    cks = wait_checkpoints(srv, job, 4)
    assert len(cks) == 4 and all(c["artifact"]["state"] is None for c in cks), cks
    dirs = round_dirs(agent, job, cks)
    parts = [pack(d) for d in dirs]
    assert agent.stop() == 0
    for c, (data, nfiles) in zip(cks, parts):
        upload(srv, agent, job, c["index"], data)
        r = node_request(srv, agent, "POST", part_url(job, 1, c["index"], "/complete"),
                         {"sha256": hashlib.sha256(data).hexdigest(), "file_count": nfiles})
        assert r.status == 200 and r.json["state"] == "complete", r
    cks = wait_checkpoints(srv, job, 4)
    assert [c["artifact"]["state"] for c in cks] == ["deleted", "complete", "deleted", "complete"]
    assert [os.path.isdir(d) for d in dirs] == [True] * 4  # nobody to tell yet
    agent.start()
    assert wait_staging(dirs, [False, True, False, True]) == [False, True, False, True], \
        agent.log_text()
    owners = [d + ".owners.json" for d in dirs]  # removed after the directory
    assert wait_staging(owners, [False, True, False, True], exists=os.path.exists) == \
        [False, True, False, True]


class DelayingProxy(harness.TcpProxy):
    """A TCP proxy in front of the server that holds each reply back for `delay` seconds before
    passing it on whole: a download that takes longer than the server's heartbeat timeout."""

    def __init__(self, port, delay):
        self.delay = delay
        super().__init__(("127.0.0.1", port))

    def relay(self, number, client, upstream):
        self.spawn(self.pipe, client, upstream)
        self.spawn(self.pipe, upstream, client, None, self.delay)


def test_a_slow_checkpoint_fetch_does_not_lose_the_node(server_factory, agent_factory):
    """The fetch of a checkpoint to resume from runs off the agent's event loop: one that takes
    three times the server's heartbeat timeout neither stalls the heartbeats (the node stays
    ALIVE, the job is not failed as lost) nor the launch, which starts once the files are in."""
    from test_resume import READER, WRITER, run_script, seen
    srv = server_factory(extra_args=("--heartbeat-timeout-s", "2"))
    a = agent_factory(srv=srv, cpus=2)
    first, _, done = run_script(srv, WRITER, "slow-fetch-a", 2)
    assert done["status"] == "SUCCEEDED", done
    [ck] = wait_artifacts(srv, first, 1)
    assert srv.request("POST", f"/api/v1/nodes/{a.node_id}/drain").status == 200
    proxy = DelayingProxy(srv.port, delay=6)
    b = agent_factory(srv=srv, cpus=2, env={"TRAINYARD_API_URL": proxy.url})
    second, work, done = run_script(srv, READER, "slow-fetch-b", 2,
                                    resume_from_checkpoint=ck["id"])
    assert done["status"] == "SUCCEEDED", (done, b.log_text())
    assert seen(work, 0)["files"]["rank-0.txt"] == b"weights of rank 0".hex()
    assert "waits for its downloads" in b.log_text()
    node = srv.request("GET", f"/api/v1/nodes/{b.node_id}").json
    assert node["status"] == "ALIVE", node
    msgs = [e["message"] or "" for e in
            srv.request("GET", f"/api/v1/jobs/{second}/events").json["events"]]
    assert not any("was lost" in m for m in msgs), msgs


def test_upload_chunks_may_exceed_the_body_cap_up_to_their_own(server_factory, agent_factory):
    """--max-upload-chunk-bytes (here 2 MiB) bounds a part's chunks, apart from --max-body-bytes
    (1 MiB) which still bounds every other body."""
    srv = server_factory(extra_args=("--max-upload-chunk-bytes", str(2 << 20)))
    agent = agent_factory(srv=srv, cpus=2, env={"TRAINYARD_API_URL": "none"})
    job = submit(srv, WORKER, "artifacts-chunks")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    wait_checkpoints(srv, job, 3)
    big = os.urandom(3 << 19)  # 1.5 MiB
    r = put_chunk(srv, agent, job, 2, 0, big)
    assert r.status == 200 and r.json["offset"] == len(big), r
    r = put_chunk(srv, agent, job, 2, len(big), os.urandom(3 << 20))
    assert r.status == 413 and str(2 << 20) in r.json["detail"], r
    r = srv.request("POST", "/api/v1/jobs", {"name": "x" * (1 << 20), "entrypoint": ["true"]})
    assert r.status == 413, r


def test_agent_falls_back_to_small_chunks_when_the_server_refuses_big_ones(server_factory,
                                                                         agent_factory):
    srv = server_factory(extra_args=("--max-upload-chunk-bytes", str(1 << 20)))
    agent_factory(srv=srv, cpus=2)
    work = harness.make_tmpdir("ty-bigck-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(textwrap.dedent("""
            import os, tempfile, trainyard
            d = tempfile.mkdtemp(prefix="ty-bigck-")
            with open(os.path.join(d, "weights.bin"), "wb") as f:
                f.write(os.urandom(10 << 20))
            trainyard.report({"loss": 1.0, "step": 1}, checkpoint=d)
        """))
    job = srv.submit({"name": "big-chunks", "entrypoint": [PY, "train.py"], "working_dir": work})
    assert srv.wait_job(job["id"], {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    [ck] = wait_artifacts(srv, job["id"], 1, timeout=60)
    assert ck["artifact"]["state"] == "complete", ck
    assert ck["size_bytes"] >= 10 << 20
