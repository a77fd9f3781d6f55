"""The OpenAPI document and the routing table describe the same API."""
import json
import subprocess

import harness


def test_openapi_document_matches_routing_table(server):
    doc = server.request("GET", "/api/v1/openapi.json").json
    assert doc["openapi"].startswith("3.1")
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops
                  if m in ("get", "post", "put", "delete", "patch")}
    routes = json.loads(subprocess.run([harness.SERVER_BIN, "--print-routes"], check=True,
                                       stdout=subprocess.PIPE, text=True).stdout)
    served = {(r["method"], r["path"]) for r in routes}
    assert documented == served


def test_openapi_refs_resolve(server):
    doc = server.request("GET", "/api/v1/openapi.json").json
    schemas = doc["components"]["schemas"]

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref:
                assert ref.startswith("#/components/schemas/")
                assert ref.split("/")[-1] in schemas, ref
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
