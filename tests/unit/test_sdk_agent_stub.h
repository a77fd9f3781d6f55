/* A tiny stand-in for the agent's report socket, run on a thread: accepts connections, checks
 * every frame with the report protocol validators (common/report_proto.h) and records hello/report
 * messages. */
#ifndef TEST_SDK_AGENT_STUB_H
#define TEST_SDK_AGENT_STUB_H

#include <jansson.h>
#include <pthread.h>

enum stub_mode {
    STUB_ACK,               /* ack every report */
    STUB_NEVER_ACK,         /* read reports, never answer */
    STUB_CLOSE_AFTER_HELLO, /* close the connection after the hello */
    STUB_REJECT,            /* answer every report with an error message */
};

struct agent_stub {
    char dir[64];
    char path[128];
    int lfd;
    int stop_pipe[2];
    enum stub_mode mode;
    pthread_t thread;
    /* recorded (read after agent_stub_stop) */
    json_t *hellos;  /* array of hello messages */
    json_t *reports; /* array of report messages */
    int bad_frames;  /* frames that failed validation */
};

/* Create the socket in a fresh temporary directory and start the thread. 0 or -1. */
int agent_stub_start(struct agent_stub *s, enum stub_mode mode);
/* Stop the thread, remove the socket; recorded arrays stay until agent_stub_free. */
void agent_stub_stop(struct agent_stub *s);
void agent_stub_free(struct agent_stub *s);

#endif
