/* Stopping criteria of plain jobs on the leader (RunConfig(stop=), spec run_config.stop,
 * docs/python-api.md): every tick, each rank-0 report of such a job that arrived since is
 * checked against them with the sweeps' own check (tune_stop_check); a job that meets one is
 * stopped through the job state machine with the reason as its event ("stop: acc 0.93 >= 0.9"),
 * in the transaction that moves its cursor (store_job_stop_record). */
#include "control_internal.h"

#include "log.h"
#include "store_job_stop.h"
#include "tune.h"

#define CTL_JOB_STOP_BATCH 256 /* reports read at once */
#define CTL_JOB_STOP_ROUNDS 8  /* batches per tick at most */

void ctl__job_stop_tick(struct control *ctl)
{
    int n = CTL_JOB_STOP_BATCH;
    for (int round = 0; n == CTL_JOB_STOP_BATCH && round < CTL_JOB_STOP_ROUNDS; round++) {
        struct store_job_stop_report *rs = NULL;
        n = store_job_stop_new_reports(ctl->db, CTL_JOB_STOP_BATCH, &rs);
        for (int i = 0; i < n; i++) {
            char why[256];
            enum tune_decision d =
                tune_stop_check(rs[i].stop, rs[i].metrics, (double)rs[i].seq, why, sizeof(why));
            if (store_job_stop_record(ctl->db, &rs[i], d == TUNE_STOP ? why : NULL) > 0) {
                TY_INFO("control", "job %lld stopped: %s", (long long)rs[i].job, why);
                ctl->dirty = true;
            }
        }
        store_job_stop_reports_free(rs, n);
    }
}
