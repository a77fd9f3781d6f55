/* slurmrestd request bodies and answers (server/slurm/slurm_req.c), with answers as Slurm
 * 22.05.8's slurmrestd gives them. */
#include "ty_test.h"

#include "slurm_rest.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

static void submit_body_carries_the_allocation(void **state)
{
    (void)state;
    const char *env[] = {"PATH=/bin:/usr/bin", "TRAINYARD_NODE=x=y", "=bad", "noequals"};
    struct slurm_alloc a = {.name = "ty-7",
                            .nodes = 2,
                            .tasks_per_node = 1,
                            .cpus_per_task = 3,
                            .gpus_per_node = 2,
                            .mem_per_node_mb = 1024,
                            .time_limit_min = 5,
                            .signal_s = 60,
                            .partition = "gpu",
                            .account = "lab",
                            .cwd = "/srv",
                            .script = "#!/bin/sh\nexec srun x\n",
                            .env = env,
                            .nenv = 4};
    char *text = slurm_submit_body(&a);
    assert_non_null(text);
    json_t *root = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(root);
    /* v0.0.38's three musts: a top-level script, job.environment, job.current_working_directory */
    assert_string_equal(json_string_value(json_object_get(root, "script")), a.script);
    json_t *job = json_object_get(root, "job");
    assert_string_equal(json_string_value(json_object_get(job, "current_working_directory")),
                        "/srv");
    json_t *e = json_object_get(job, "environment");
    assert_int_equal(json_object_size(e), 2);
    assert_string_equal(json_string_value(json_object_get(e, "TRAINYARD_NODE")), "x=y");
    assert_int_equal(json_integer_value(json_object_get(job, "nodes")), 2);
    assert_int_equal(json_integer_value(json_object_get(job, "tasks")), 2);
    assert_int_equal(json_integer_value(json_object_get(job, "cpus_per_task")), 3);
    assert_int_equal(json_integer_value(json_object_get(job, "memory_per_node")), 1024);
    assert_string_equal(json_string_value(json_object_get(job, "gres")), "gpu:2");
    assert_int_equal(json_integer_value(json_object_get(job, "time_limit")), 5);
    assert_string_equal(json_string_value(json_object_get(job, "signal")), "USR1@60");
    assert_true(json_is_true(json_object_get(job, "no_requeue")));
    assert_null(json_object_get(job, "requeue"));
    assert_string_equal(json_string_value(json_object_get(job, "partition")), "gpu");
    assert_string_equal(json_string_value(json_object_get(job, "account")), "lab");
    json_decref(root);

    /* Nothing optional asked: nothing optional sent. */
    struct slurm_alloc b = {.nodes = 1, .tasks_per_node = 1, .script = "#!/bin/sh\n"};
    text = slurm_submit_body(&b);
    root = json_loads(text, 0, NULL);
    free(text);
    job = json_object_get(root, "job");
    assert_null(json_object_get(job, "gres"));
    assert_null(json_object_get(job, "time_limit"));
    assert_null(json_object_get(job, "partition"));
    assert_null(json_object_get(job, "memory_per_node"));
    assert_non_null(json_object_get(job, "environment"));
    json_decref(root);
}

static void submit_answers_say_accepted_or_rejected_or_unavailable(void **state)
{
    (void)state;
    char err[256];
    int64_t id;
    assert_int_equal(slurm_parse_submit(200,
                                        "{\"meta\":{},\"errors\":[],\"job_id\":42,"
                                        "\"step_id\":\"BATCH\",\"job_submit_user_msg\":\"\"}",
                                        &id, err, sizeof(err)),
                     SLURM_OK);
    assert_int_equal(id, 42);
    /* An unknown partition: no job. */
    assert_int_equal(
        slurm_parse_submit(
            500,
            "{\"errors\":[{\"error_code\":2000,\"error\":\"Invalid partition name specified\"}]}",
            &id, err, sizeof(err)),
        SLURM_REJECTED);
    assert_int_equal(id, -1);
    assert_string_equal(err, "Invalid partition name specified");
    /* Too many nodes: an error, and a job that Slurm created all the same. */
    assert_int_equal(slurm_parse_submit(200,
                                        "{\"errors\":[{\"error_code\":2015,\"error\":\"Requested "
                                        "partition configuration not available now\"}],"
                                        "\"job_id\":2}",
                                        &id, err, sizeof(err)),
                     SLURM_REJECTED);
    assert_int_equal(id, 2);
    assert_string_equal(err, "Requested partition configuration not available now");
    /* slurmctld unreachable, or the nodes not back after its restart: the cluster's fault. */
    assert_int_equal(slurm_parse_submit(500,
                                        "{\"errors\":[{\"error_code\":1800,\"error\":\"Unable to "
                                        "contact slurm controller (connect failure)\"}]}",
                                        &id, err, sizeof(err)),
                     SLURM_UNAVAILABLE);
    assert_int_equal(slurm_parse_submit(500,
                                        "{\"errors\":[{\"error_code\":2049,\"error\":\"Required "
                                        "node not available (down, drained or reserved)\"}]}",
                                        &id, err, sizeof(err)),
                     SLURM_UNAVAILABLE);
    assert_non_null(strstr(err, "Required node not available"));
    /* A refused token, a proxy's page: the cluster's fault. */
    assert_int_equal(slurm_parse_submit(401, "Authentication failure", &id, err, sizeof(err)),
                     SLURM_UNAVAILABLE);
    assert_non_null(strstr(err, "refused"));
    assert_int_equal(slurm_parse_submit(502, "<html>bad gateway</html>", &id, err, sizeof(err)),
                     SLURM_UNAVAILABLE);
}

static void job_answers_give_state_reason_or_gone(void **state)
{
    (void)state;
    char err[256];
    struct slurm_job_info info;
    assert_int_equal(slurm_parse_job(200,
                                     "{\"errors\":[],\"jobs\":[{\"job_id\":7,\"job_state\":"
                                     "\"PENDING\",\"state_reason\":\"Resources\",\"nodes\":\"\","
                                     "\"name\":\"trainyard-3-1\"}]}",
                                     7, &info, err, sizeof(err)),
                     SLURM_OK);
    assert_string_equal(info.state, "PENDING");
    assert_string_equal(info.reason, "Resources");
    assert_string_equal(info.name, "trainyard-3-1");
    assert_int_equal(
        slurm_parse_job(
            500,
            "{\"errors\":[{\"description\":\"Unable to find JobId=99\",\"error_number\":"
            "2017,\"error\":\"Invalid job id specified\",\"source\":"
            "\"slurm_load_job\"}],\"jobs\":[]}",
            99, &info, err, sizeof(err)),
        SLURM_REJECTED);
    assert_int_equal(slurm_parse_job(500,
                                     "{\"errors\":[{\"error_number\":1007,\"error\":\"Protocol "
                                     "authentication error\"}],\"jobs\":[]}",
                                     9, &info, err, sizeof(err)),
                     SLURM_UNAVAILABLE);
    assert_non_null(strstr(err, "Protocol authentication error"));
    assert_int_equal(slurm_parse_job(200, "not json", 9, &info, err, sizeof(err)),
                     SLURM_UNAVAILABLE);
}

static void states_are_final_or_lost(void **state)
{
    (void)state;
    assert_false(slurm_state_is_final("PENDING"));
    assert_false(slurm_state_is_final("RUNNING"));
    assert_true(slurm_state_is_final("COMPLETED"));
    assert_true(slurm_state_is_final("NODE_FAIL"));
    assert_true(slurm_state_is_lost("NODE_FAIL"));
    assert_true(slurm_state_is_lost("PREEMPTED"));
    assert_true(slurm_state_is_lost("TIMEOUT"));
    assert_false(slurm_state_is_lost("CANCELLED"));
    assert_false(slurm_state_is_lost("COMPLETED"));
}

static void jwt_claims_give_the_user_and_the_expiry(void **state)
{
    (void)state;
    /* {"alg":"HS256","typ":"JWT"}.{"exp":1,"iat":0,"sun":"root"}.sig, as `scontrol token` makes */
    const char *tok = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
                      "eyJleHAiOjEsImlhdCI6MCwic3VuIjoicm9vdCJ9.c2ln";
    char user[64];
    int64_t exp = -1;
    assert_int_equal(slurm_jwt_claims(tok, user, sizeof(user), &exp), 0);
    assert_string_equal(user, "root");
    assert_int_equal(exp, 1);
    /* {"sun":"ty"}: no expiry */
    assert_int_equal(slurm_jwt_claims("e30.eyJzdW4iOiJ0eSJ9.c2ln", user, sizeof(user), &exp), 0);
    assert_string_equal(user, "ty");
    assert_int_equal(exp, 0);
    assert_int_equal(slurm_jwt_claims("garbage", user, sizeof(user), &exp), -1);
    assert_int_equal(slurm_jwt_claims("a.b.c", user, sizeof(user), &exp), -1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(submit_body_carries_the_allocation),
    cmocka_unit_test(submit_answers_say_accepted_or_rejected_or_unavailable),
    cmocka_unit_test(job_answers_give_state_reason_or_gone),
    cmocka_unit_test(states_are_final_or_lost),
    cmocka_unit_test(jwt_claims_give_the_user_and_the_expiry),
};

TY_TEST_MAIN(tests)
