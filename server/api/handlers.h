/* Every REST handler, one per file (h_<noun>_<verb>.c), listed in the table of routes.c. */
#ifndef SRV_HANDLERS_H
#define SRV_HANDLERS_H

#include "http.h"

enum MHD_Result h_health(struct srv_request *req);
enum MHD_Result h_version(struct srv_request *req);
enum MHD_Result h_openapi(struct srv_request *req);
enum MHD_Result h_jobs_submit(struct srv_request *req);
enum MHD_Result h_jobs_list(struct srv_request *req);
enum MHD_Result h_jobs_get(struct srv_request *req);
enum MHD_Result h_jobs_stop(struct srv_request *req);
enum MHD_Result h_jobs_patch(struct srv_request *req);
enum MHD_Result h_goodput(struct srv_request *req);
enum MHD_Result h_jobs_delete(struct srv_request *req);
enum MHD_Result h_jobs_workers(struct srv_request *req);
enum MHD_Result h_jobs_usage(struct srv_request *req);
enum MHD_Result h_nodes_usage(struct srv_request *req);
enum MHD_Result h_jobs_events(struct srv_request *req);
enum MHD_Result h_jobs_attempts(struct srv_request *req);
enum MHD_Result h_jobs_metrics(struct srv_request *req);
enum MHD_Result h_jobs_logs(struct srv_request *req);
enum MHD_Result h_jobs_checkpoints(struct srv_request *req);
/* h_checkpoint_parts.c: agents' uploads of checkpoint parts (node credential). */
enum MHD_Result h_checkpoint_part_status(struct srv_request *req);
enum MHD_Result h_checkpoint_part_put(struct srv_request *req);
/* The part PUT's body, written as it arrives. */
extern const struct srv_body_stream h_checkpoint_part_stream;
enum MHD_Result h_checkpoint_part_complete(struct srv_request *req);
enum MHD_Result h_checkpoint_shared(struct srv_request *req);

enum MHD_Result h_checkpoint_part_failed(struct srv_request *req);
/* Shared by the part handlers (uploads and shared storage): {"state","offset"} with 200. */
enum MHD_Result h_part_reply_state(struct srv_request *req, const char *state, int64_t offset);
/* Reads a completion body {"sha256","file_count"} (`what` describes the SHA-256 in the 400's
 * text) into *sha (borrowed from body) and *files. When `part` is already complete or deleted,
 * replies itself: its state when the SHA-256 is the same, 422 otherwise. 0: go on; -1: *res holds
 * the queued reply. */
struct store_part;
int h_part_completion(struct srv_request *req, json_t *body, const char *what,
                      const struct store_part *part, const char **sha, int64_t *files,
                      enum MHD_Result *res);
/* h_code.c: code packages (issue 15). */
enum MHD_Result h_code_get(struct srv_request *req);
enum MHD_Result h_code_put(struct srv_request *req);
enum MHD_Result h_code_complete(struct srv_request *req);
enum MHD_Result h_agent_code(struct srv_request *req);
/* Whether the request comes from a node: X-Trainyard-Node names it and the bearer is its node
 * credential (with --auth none the name suffices). 0, or -1 after queuing a 401 (*res). */
int srv_node_auth(struct srv_request *req, enum MHD_Result *res);
enum MHD_Result h_agent_checkpoint_archive(struct srv_request *req);
/* h_checkpoints.c: one checkpoint, and its files as a tar (Range). */
enum MHD_Result h_checkpoints_get(struct srv_request *req);
enum MHD_Result h_checkpoints_archive(struct srv_request *req);
/* h_projects.c: projects and their members (issue 22). */
enum MHD_Result h_projects_create(struct srv_request *req);
enum MHD_Result h_projects_list(struct srv_request *req);
enum MHD_Result h_projects_get(struct srv_request *req);
enum MHD_Result h_projects_add_member(struct srv_request *req);
enum MHD_Result h_projects_remove_member(struct srv_request *req);
enum MHD_Result h_projects_delete(struct srv_request *req);
enum MHD_Result h_nodes_list(struct srv_request *req);
enum MHD_Result h_nodes_get(struct srv_request *req);
enum MHD_Result h_nodes_drain(struct srv_request *req);
enum MHD_Result h_nodes_undrain(struct srv_request *req);
enum MHD_Result h_tokens_create(struct srv_request *req);
enum MHD_Result h_tokens_list(struct srv_request *req);
enum MHD_Result h_tokens_delete(struct srv_request *req);
enum MHD_Result h_prometheus(struct srv_request *req);
/* h_quotas.c: the quotas of users and projects (migrations/0030_quotas.sql). */
enum MHD_Result h_quotas_user_get(struct srv_request *req);
enum MHD_Result h_quotas_user_put(struct srv_request *req);
enum MHD_Result h_quotas_project_get(struct srv_request *req);
enum MHD_Result h_quotas_project_put(struct srv_request *req);
/* h_sweeps.c: sweeps (Ray Tune, docs/sweeps.md). */
enum MHD_Result h_sweeps_submit(struct srv_request *req);
enum MHD_Result h_sweeps_list(struct srv_request *req);
enum MHD_Result h_sweeps_get(struct srv_request *req);
enum MHD_Result h_sweeps_stop(struct srv_request *req);

#endif
