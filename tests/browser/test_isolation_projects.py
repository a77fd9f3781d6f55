"""Issue 22: the dashboard's jobs list filters by project, and offers only the projects the
signed-in token may see; a private project's jobs are not listed to others."""
from test_dashboard import cluster, run  # noqa: F401 (cluster is the fixture)


def test_jobs_list_filters_by_project_and_hides_private_projects(cluster):  # noqa: F811
    s = cluster["server"]
    r = s.request("POST", "/api/v1/projects", {"name": "browser-lab", "members": ["uma"]})
    assert r.status == 201, r
    lab = s.submit({"name": "in-lab", "entrypoint": ["true"], "project": "browser-lab"},
                   token=cluster["user"])["id"]
    shared = s.submit({"name": "in-default", "entrypoint": ["true"]}, token=cluster["user"])["id"]

    got = run("project_filter", cluster, cluster["user"], extra={"project": "browser-lab"})
    assert "browser-lab" in got["options"] and "default" in got["options"], got
    assert got["ids"] == [lab], got

    got = run("project_filter", cluster, cluster["viewer"])
    assert "browser-lab" not in got["options"], got
    assert shared in got["ids"] and lab not in got["ids"], got
