/* The control thread: owns the cluster's live state (which agent connection is which node, when
 * each was last heard), applies agent events to the database, runs the scheduler whenever a
 * decision may have changed, and sends launch and stop orders. It is the only thread that talks
 * to agents; HTTP threads only kick it. */
#ifndef SRV_CONTROL_H
#define SRV_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

struct srv;
struct control;
struct hub;

/* Starts the websocket hub and the control thread. Returns NULL (logged) on failure. */
struct control *control_start(struct srv *srv);
/* Stops the thread and the hub; joins both. NULL is a no-op. */
void control_stop(struct control *ctl);
/* The websocket hub the control thread started (the stream thread attaches to it). */
struct hub *control_hub(struct control *ctl);
/* Whether this server is the leader among those sharing its database (leader.h): the one that
 * schedules, times jobs out and marks nodes LOST. Any thread; NULL: false. */
bool control_is_leader(struct control *ctl);
/* Asks for a scheduling pass soon (after a submit, stop or drain). Thread-safe; NULL is a no-op. */
void control_kick(struct control *ctl);
/* Tells every connected agent that job `id` was deleted (agent message `forget`: they remove its
 * checkpoint staging). Any thread; the control thread sends it. An agent that is not connected
 * then keeps the staging. */
void control_forget_job(struct control *ctl, int64_t id);

#endif
