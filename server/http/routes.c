/* The routing table: every endpoint of the REST API, with the least role that may call it.
 * Every route under /api/v1/jobs/{id} and /api/v1/checkpoints/{id} reads or changes one job: the
 * caller must also see that job's project, or gets the route's 404 (srv_auth_check, auth.c).
 * tests/integration/test_openapi.py checks this table and server/api/openapi.json against each
 * other (via `trainyard-server --print-routes`). */
#include "handlers.h"

const struct srv_route srv_routes[] = {
    {"GET", "/api/v1/health", h_health, SRV_ROLE_NONE},
    {"GET", "/api/v1/version", h_version, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/openapi.json", h_openapi, SRV_ROLE_VIEWER},
    {"POST", "/api/v1/jobs", h_jobs_submit, SRV_ROLE_USER},
    {"GET", "/api/v1/jobs", h_jobs_list, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}", h_jobs_get, SRV_ROLE_VIEWER},
    {"DELETE", "/api/v1/jobs/{id}", h_jobs_delete, SRV_ROLE_USER},
    {"POST", "/api/v1/jobs/{id}/stop", h_jobs_stop, SRV_ROLE_USER},
    {"GET", "/api/v1/jobs/{id}/workers", h_jobs_workers, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}/events", h_jobs_events, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}/attempts", h_jobs_attempts, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}/metrics", h_jobs_metrics, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}/logs", h_jobs_logs, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}/checkpoints", h_jobs_checkpoints, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/checkpoints/{id}", h_checkpoints_get, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/checkpoints/{id}/archive", h_checkpoints_archive, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/agent/checkpoint-archives/{id}", h_agent_checkpoint_archive, SRV_ROLE_NONE},
    {"GET", "/api/v1/agent/checkpoints/{job}/{attempt}/{index}/part", h_checkpoint_part_status,
     SRV_ROLE_NONE},
    {"PUT", "/api/v1/agent/checkpoints/{job}/{attempt}/{index}/part", h_checkpoint_part_put,
     SRV_ROLE_NONE},
    {"POST", "/api/v1/agent/checkpoints/{job}/{attempt}/{index}/part/complete",
     h_checkpoint_part_complete, SRV_ROLE_NONE},
    {"POST", "/api/v1/agent/checkpoints/{job}/{attempt}/{index}/shared", h_checkpoint_shared,
     SRV_ROLE_NONE},

    {"POST", "/api/v1/agent/checkpoints/{job}/{attempt}/{index}/part/failed",
     h_checkpoint_part_failed, SRV_ROLE_NONE},
    {"GET", "/api/v1/code/{sha256}", h_code_get, SRV_ROLE_USER},
    {"PUT", "/api/v1/code/{sha256}", h_code_put, SRV_ROLE_USER},
    {"POST", "/api/v1/code/{sha256}/complete", h_code_complete, SRV_ROLE_USER},
    {"GET", "/api/v1/agent/code/{sha256}", h_agent_code, SRV_ROLE_NONE},
    {"POST", "/api/v1/projects", h_projects_create, SRV_ROLE_USER},
    {"GET", "/api/v1/projects", h_projects_list, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/projects/{name}", h_projects_get, SRV_ROLE_VIEWER},
    {"DELETE", "/api/v1/projects/{name}", h_projects_delete, SRV_ROLE_USER},
    {"POST", "/api/v1/projects/{name}/members", h_projects_add_member, SRV_ROLE_USER},
    {"DELETE", "/api/v1/projects/{name}/members/{user}", h_projects_remove_member, SRV_ROLE_USER},
    {"POST", "/api/v1/sweeps", h_sweeps_submit, SRV_ROLE_USER},
    {"GET", "/api/v1/sweeps", h_sweeps_list, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/sweeps/{id}", h_sweeps_get, SRV_ROLE_VIEWER},
    {"POST", "/api/v1/sweeps/{id}/stop", h_sweeps_stop, SRV_ROLE_USER},
    {"GET", "/api/v1/nodes", h_nodes_list, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/nodes/{id}", h_nodes_get, SRV_ROLE_VIEWER},
    {"POST", "/api/v1/nodes/{id}/drain", h_nodes_drain, SRV_ROLE_ADMIN},
    {"POST", "/api/v1/nodes/{id}/undrain", h_nodes_undrain, SRV_ROLE_ADMIN},
    {"POST", "/api/v1/tokens", h_tokens_create, SRV_ROLE_ADMIN},
    {"GET", "/api/v1/tokens", h_tokens_list, SRV_ROLE_ADMIN},
    {"DELETE", "/api/v1/tokens/{id}", h_tokens_delete, SRV_ROLE_ADMIN},
    {"GET", "/api/v1/quotas/users/{name}", h_quotas_user_get, SRV_ROLE_USER},
    {"PUT", "/api/v1/quotas/users/{name}", h_quotas_user_put, SRV_ROLE_ADMIN},
    {"GET", "/api/v1/quotas/projects/{name}", h_quotas_project_get, SRV_ROLE_USER},
    {"PUT", "/api/v1/quotas/projects/{name}", h_quotas_project_put, SRV_ROLE_ADMIN},
    {"GET", "/metrics", h_prometheus, SRV_ROLE_VIEWER},
    {NULL, NULL, NULL, SRV_ROLE_NONE},
};

const struct srv_streamed_route srv_streamed_routes[] = {
    {h_checkpoint_part_put, &h_checkpoint_part_stream},
    {NULL, NULL},
};
