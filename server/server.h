/* The server process: everything a request handler can reach. One instance, made in main.c. */
#ifndef SRV_SERVER_H
#define SRV_SERVER_H

#include "config.h"
#include "telemetry.h"

struct db;
struct pg_embedded;
struct MHD_Daemon;
struct control;
struct stream;
struct cache;
struct artifact_store;
struct submit_queue;

struct srv {
    struct srv_config cfg;
    struct db *db;
    struct pg_embedded *pg; /* NULL with --database-url */
    struct MHD_Daemon *http;
    struct srv_heads *heads;          /* the request-head deadline (http/heads.h) */
    struct control *control;          /* agents, scheduling, lifecycle */
    struct stream *stream;            /* /stream subscribers */
    struct cache *job_cache;          /* GET /api/v1/jobs/{id} bodies */
    struct cache *token_cache;        /* token hash -> identity */
    struct submit_queue *submits;     /* POST /api/v1/jobs, committed together */
    struct srv_telemetry telemetry;   /* GET /metrics */
    struct artifact_store *artifacts; /* checkpoint parts (server/artifacts/) */
    char *web_dir;                    /* the dashboard's files (http/static.c); NULL: none */
};

#endif
