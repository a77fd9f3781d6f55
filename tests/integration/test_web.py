"""The web dashboard's files (server/http/static.c): GET / is index.html, hashed assets are cached
for a year and index.html not at all, every file carries the security headers, no path leaves
--web-dir (.., encoded .., symlinks, hidden files), and the REST API's own 404s are unchanged.
Anyone may fetch these files (they hold no data): tried here with no token at all."""
import http.client
import os
import subprocess

import harness
import pytest


@pytest.fixture
def web_dir():
    root = harness.make_tmpdir("ty-web-")
    web = os.path.join(root, "web")
    os.makedirs(os.path.join(web, "assets"))
    with open(os.path.join(web, "index.html"), "w") as f:
        f.write("<!doctype html><title>Trainyard</title>")
    with open(os.path.join(web, "assets", "index-AbC123.js"), "w") as f:
        f.write("console.log(1)")
    with open(os.path.join(web, ".hidden"), "w") as f:
        f.write("HIDDEN-CONTENT")
    with open(os.path.join(root, "secret.txt"), "w") as f:
        f.write("SECRET")
    os.symlink(os.path.join(root, "secret.txt"), os.path.join(web, "link.txt"))
    return web


def raw_get(server, path, method="GET"):
    """Sends `path` exactly as given (no client-side normalisation)."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    c.putrequest(method, path, skip_accept_encoding=True)
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def test_index_is_served_at_root_without_a_token_and_never_cached(server_factory, web_dir):
    s = server_factory(extra_args=["--web-dir", web_dir])
    status, headers, body = raw_get(s, "/")
    assert status == 200
    assert b"<title>Trainyard</title>" in body
    assert headers["content-type"].startswith("text/html")
    assert headers["cache-control"] == "no-cache"
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    assert "object-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    status, headers, _ = raw_get(s, "/index.html")
    assert status == 200 and headers["cache-control"] == "no-cache"


def test_hashed_assets_are_cached_for_a_year(server_factory, web_dir):
    s = server_factory(extra_args=["--web-dir", web_dir])
    status, headers, body = raw_get(s, "/assets/index-AbC123.js")
    assert status == 200 and body == b"console.log(1)"
    assert headers["content-type"].startswith("text/javascript")
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    assert headers["x-content-type-options"] == "nosniff"
    assert "content-security-policy" in headers
    status, headers, body = raw_get(s, "/assets/index-AbC123.js", method="HEAD")
    assert status == 200 and body == b""


@pytest.mark.parametrize("path", [
    "/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt", "/assets/%2E%2E/%2e%2e/secret.txt",
    "/..%2fsecret.txt", "/%2e%2e%2fsecret.txt", "//etc/passwd", "/assets/..%5c..%5csecret.txt",
    "/link.txt", "/.hidden", "/assets/", "/nope.html", "/assets/%2e", "/assets/.",
])
def test_paths_outside_the_web_dir_are_refused(server_factory, web_dir, path):
    s = server_factory(extra_args=["--web-dir", web_dir])
    status, headers, body = raw_get(s, path)
    assert status == 404, (path, status, body)
    assert b"SECRET" not in body and b"HIDDEN-CONTENT" not in body
    assert headers["content-type"] == "application/problem+json"


def test_unknown_api_paths_keep_their_problem_404(server_factory, web_dir):
    s = server_factory(extra_args=["--web-dir", web_dir])
    r = s.request("GET", "/api/v1/nope", token=None)
    assert r.status == 404 and r.json["code"] == "not-found"
    assert r.headers["Content-Type"] == "application/problem+json"
    r = s.request("GET", "/api/v1/jobs", token=None)
    assert r.status == 401  # the API still wants its token
    r = s.request("POST", "/", body={}, token=None)
    assert r.status == 404


def test_without_a_built_dashboard_root_is_a_404_problem_naming_the_cause(server_factory):
    s = server_factory(extra_args=["--web-dir", harness.make_tmpdir("ty-web-empty-")])
    status, headers, body = raw_get(s, "/")
    assert status == 404
    assert headers["content-type"] == "application/problem+json"


def test_job_list_filters_by_owner_and_name(server):
    alice = server.create_token("alice", "user")
    bob = server.create_token("bob", "user")
    spec = {"entrypoint": ["/bin/true"], "backend": "none"}
    server.submit({**spec, "name": "resnet-A"}, token=alice)
    server.submit({**spec, "name": "bert-small"}, token=alice)
    server.submit({**spec, "name": "ResNet-b"}, token=bob)
    names = lambda q: [j["name"] for j in server.request("GET", f"/api/v1/jobs?{q}").json["jobs"]]
    assert names("owner=alice") == ["bert-small", "resnet-A"]
    assert names("name=resnet") == ["ResNet-b", "resnet-A"]
    assert names("owner=bob&name=resnet") == ["ResNet-b"]
    assert names("owner=carol") == []
    r = server.request("GET", "/api/v1/jobs?owner=")
    assert r.status == 400 and r.json["errors"][0]["field"] == "owner"
    r = server.request("GET", "/api/v1/jobs?owner=alice", token=None)
    assert r.status == 401


def test_metrics_step_range_returns_that_range_at_full_detail(server, database):
    """A chart's zoom: GET /jobs/{id}/metrics?step_min=&step_max= reads only that range, so its
    max_points are all spent inside it."""
    job = server.submit({"name": "zoom", "entrypoint": ["/bin/true"], "backend": "none"})["id"]
    subprocess.run(["psql", "-d", database, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c",
                    "INSERT INTO reports (job_id, attempt, rank, seq, step, reported_at, "
                    f"metrics) SELECT {job}, 1, 0, s, s, "
                    "now() + s * interval '1 ms', jsonb_build_object('loss', 1.0 / s) "
                    "FROM generate_series(1, 1000) s"], check=True)
    viewer = server.create_token("vic", "viewer")
    whole = server.request("GET", f"/api/v1/jobs/{job}/metrics?max_points=50", token=viewer)
    assert whole.status == 200 and len(whole.json["metrics"]) == 50
    r = server.request("GET", f"/api/v1/jobs/{job}/metrics?max_points=50&step_min=100"
                              "&step_max=140", token=viewer)
    assert r.status == 200
    assert [p["step"] for p in r.json["metrics"]] == list(range(100, 141))
    r = server.request("GET", f"/api/v1/jobs/{job}/metrics?mode=band&max_points=5&step_min=991")
    assert [b["step_first"] for b in r.json["metrics"]] == [991, 993, 995, 997, 999]
    r = server.request("GET", f"/api/v1/jobs/{job}/metrics?step_min=20&step_max=10")
    assert r.status == 400 and r.json["errors"][0]["field"] == "step_max"
    r = server.request("GET", f"/api/v1/jobs/{job}/metrics?step_min=x")
    assert r.status == 400 and r.json["errors"][0]["field"] == "step_min"
    r = server.request("GET", f"/api/v1/jobs/{job}/metrics?step_min=1", token=None)
    assert r.status == 401


def test_metrics_time_range_returns_that_range_at_full_detail(server, database):
    """A chart's zoom on the wall-time axis: GET /jobs/{id}/metrics?time_min=&time_max= (epoch
    seconds, inclusive, fractions allowed) reads only the points reported in that range."""
    job = server.submit({"name": "tzoom", "entrypoint": ["/bin/true"], "backend": "none"})["id"]
    base = 1767225600  # 2026-01-01T00:00:00Z; point s is reported at base + s seconds
    subprocess.run(["psql", "-d", database, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c",
                    "INSERT INTO reports (job_id, attempt, rank, seq, step, reported_at, "
                    f"metrics) SELECT {job}, 1, 0, s, s, "
                    "timestamptz '2026-01-01 00:00:00+00' + s * interval '1 s', "
                    "jsonb_build_object('loss', 1.0 / s) FROM generate_series(1, 1000) s"],
                   check=True)
    viewer = server.create_token("vic", "viewer")
    url = f"/api/v1/jobs/{job}/metrics?max_points=50"
    whole = server.request("GET", url, token=viewer)
    assert whole.status == 200 and len(whole.json["metrics"]) == 50
    r = server.request("GET", f"{url}&time_min={base + 100}&time_max={base + 140}", token=viewer)
    assert r.status == 200
    assert [p["step"] for p in r.json["metrics"]] == list(range(100, 141))
    assert r.json["metrics"][0]["time"].startswith("2026-01-01T00:01:40")
    r = server.request("GET", f"{url}&time_min={base + 100.5}&time_max={base + 103.25}")
    assert [p["step"] for p in r.json["metrics"]] == [101, 102, 103]
    r = server.request("GET", f"/api/v1/jobs/{job}/metrics?mode=band&max_points=5"
                              f"&time_min={base + 991}")
    assert [b["step_first"] for b in r.json["metrics"]] == [991, 993, 995, 997, 999]
    r = server.request("GET", f"{url}&time_max={base + 3}&step_min=2")
    assert [p["step"] for p in r.json["metrics"]] == [2, 3]
    r = server.request("GET", f"{url}&time_min={base + 20}&time_max={base + 10}")
    assert r.status == 400 and r.json["errors"][0]["field"] == "time_max"
    for bad in ("x", "-1", "nan", "2026-01-01T00:00:00Z", ""):
        r = server.request("GET", f"{url}&time_min={bad}")
        assert r.status == 400 and r.json["errors"][0]["field"] == "time_min", bad
    r = server.request("GET", f"{url}&time_max=1e400")
    assert r.status == 400 and r.json["errors"][0]["field"] == "time_max"
    r = server.request("GET", f"{url}&time_min={base}", token=None)
    assert r.status == 401
