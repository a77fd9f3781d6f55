"""Issue 27: no NOTIFY is sent inside a writing transaction any more (PostgreSQL serialises the
commits of notifying transactions); a server wakes its own stream thread after its commits and
tells the other servers on the database with one coalesced NOTIFY. A /stream subscriber of one
server must still get what is written through another server, as it did before."""
import secrets

from test_stream import Sub


def test_a_subscriber_of_one_server_sees_jobs_submitted_and_stopped_through_another(
        server_factory):
    token = "tyc_" + secrets.token_hex(20)
    a = server_factory(env={"TRAINYARD_CLUSTER_TOKEN": token})
    b = server_factory(env={"TRAINYARD_CLUSTER_TOKEN": token})
    b.admin_token = a.admin_token  # tokens live in the database
    on_b = Sub(b)
    on_b.subscribe(None)
    job = a.submit({"name": "peer", "entrypoint": ["true"]})["id"]
    on_b.read_until(lambda m: m["type"] == "event" and m.get("cluster")
                    and m["data"].get("id") == job)
    on_b.subscribe(job)
    r = a.request("POST", f"/api/v1/jobs/{job}/stop")
    assert r.status in (200, 202), r
    on_b.read_until(lambda m: m["type"] == "event" and m.get("job") == job
                    and m["kind"] == "event" and "STOP" in str(m["data"]).upper())
    on_b.close()
