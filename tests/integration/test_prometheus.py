"""GET /metrics: the server's figures in Prometheus text format, parsed by prometheus_client's
parser (Debian python3-prometheus-client), and its counters checked against what the test did."""
import pytest
from prometheus_client.parser import text_string_to_metric_families

from test_metrics import SERVER_ARGS, FakeAgent, metrics, running_job


@pytest.fixture
def srv(server_factory):
    return server_factory(extra_args=SERVER_ARGS)


def scrape(srv, token="admin"):
    """GET /metrics parsed: {(sample name, frozenset of labels): value}, and the families' types."""
    r = srv.request("GET", "/metrics", token=token)
    assert r.status == 200, r
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples, types = {}, {}
    for family in text_string_to_metric_families(r.text):
        types[family.name] = family.type
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, key  # each series once
            samples[key] = s.value
    return samples, types


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def test_anonymous_may_not_read_metrics_a_viewer_may(srv):
    r = srv.request("GET", "/metrics", token=None)
    assert r.status == 401, r
    assert r.headers["Content-Type"] == "application/problem+json"
    assert srv.request("GET", "/metrics", token="not-a-token").status == 401
    viewer = srv.create_token("prometheus", "viewer")
    samples, types = scrape(srv, token=viewer)
    assert value(samples, "trainyard_database_up") == 1


def test_families_have_their_types(srv):
    _, types = scrape(srv)
    assert types["trainyard_jobs"] == "gauge"
    assert types["trainyard_reports_ingested"] == "counter"
    assert types["trainyard_metric_points_ingested"] == "counter"
    assert types["trainyard_log_lines_ingested"] == "counter"
    assert types["trainyard_stream_subscribers"] == "gauge"
    assert types["trainyard_stream_dropped_subscribers"] == "counter"
    assert types["trainyard_http_requests"] == "counter"
    assert types["trainyard_http_request_duration_seconds"] == "histogram"
    assert types["trainyard_db_pool_waits"] == "counter"
    assert types["trainyard_submissions_queued"] == "gauge"
    assert types["trainyard_scheduling_pass_duration_seconds"] == "histogram"


def test_requests_to_a_route_are_counted_with_their_latency(srv):
    job = srv.submit({"entrypoint": ["true"]})["id"]
    route = dict(method="GET", route="/api/v1/jobs/{id}")
    before, _ = scrape(srv)
    for _ in range(3):
        assert srv.request("GET", f"/api/v1/jobs/{job}").status == 200
    assert srv.request("GET", "/api/v1/jobs/999999").status == 404
    assert srv.request("GET", "/nowhere").status == 404
    after, _ = scrape(srv)
    count = "trainyard_http_requests_total"
    assert value(after, count, code="2xx", **route) - value(before, count, code="2xx", **route) == 3
    assert value(after, count, code="4xx", **route) - value(before, count, code="4xx", **route) == 1
    unmatched = dict(method="", route="unmatched", code="4xx")
    assert value(after, count, **unmatched) - value(before, count, **unmatched) == 1
    hist = "trainyard_http_request_duration_seconds"
    grew = value(after, hist + "_count", **route) - value(before, hist + "_count", **route)
    assert grew == 4
    assert value(after, hist + "_bucket", le="+Inf", **route) == value(after, hist + "_count",
                                                                       **route)
    assert value(after, hist + "_sum", **route) > value(before, hist + "_sum", **route)
    # The submission itself: one 2xx POST.
    assert value(after, count, method="POST", route="/api/v1/jobs", code="2xx") == 1


def test_reports_and_points_counters_follow_what_was_sent(srv):
    node = FakeAgent(srv)
    try:
        job = running_job(srv, node)
        before, _ = scrape(srv)
        n = 7
        for k in range(1, n + 1):
            node.report(job, 0, k, {"loss": 1.0 / k, "acc": k / 10.0, "note": "x"}, step=k)
        node.report(job, 0, 1, {"loss": 1.0, "acc": 0.1}, step=1)  # a resend: not counted
        after, _ = scrape(srv)
        assert len(metrics(srv, job)) == 3 * n  # "note" too: any JSON value is kept
    finally:
        node.close()
    reports = "trainyard_reports_ingested_total"
    points = "trainyard_metric_points_ingested_total"
    assert value(after, reports) - value(before, reports) == n
    assert value(after, points) - value(before, points) == 3 * n


def test_cluster_figures(srv):
    node = FakeAgent(srv, cpus=4)
    try:
        srv.submit({"entrypoint": ["true"], "scaling_config": {"num_workers": 64}})  # never fits
        running_job(srv, node, num_workers=2)
        s, _ = scrape(srv)
    finally:
        node.close()
    assert value(s, "trainyard_jobs", status="RUNNING") == 1
    assert value(s, "trainyard_jobs", status="PENDING") == 1
    assert value(s, "trainyard_jobs", status="SUCCEEDED") == 0
    assert value(s, "trainyard_queue_length") == 1
    assert value(s, "trainyard_queue_oldest_pending_seconds") >= 0
    assert value(s, "trainyard_nodes", state="alive") == 1
    assert value(s, "trainyard_nodes", state="lost") == 0
    assert value(s, "trainyard_cpus_total") == 4
    assert value(s, "trainyard_cpus_allocated") == 2
    assert value(s, "trainyard_gpus_total") == 0
    assert value(s, "trainyard_gpus_allocated") == 0
    assert value(s, "trainyard_scheduling_pass_duration_seconds_count") >= 1
    assert value(s, "trainyard_db_pool_waits_total") >= 0
    assert value(s, "trainyard_stream_subscribers") >= 0
