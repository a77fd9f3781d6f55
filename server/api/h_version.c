/* GET /api/v1/version: the server's version, and where its live stream is (docs/streams.md). */
#include "handlers.h"
#include "hub.h"
#include "server.h"
#include "version.h"

enum MHD_Result h_version(struct srv_request *req)
{
    return srv_reply_json(req, MHD_HTTP_OK,
                          json_pack("{s:s, s:s, s:{s:I, s:s, s:s}}", "version", TRAINYARD_VERSION,
                                    "api", "v1", "stream", "port",
                                    (json_int_t)req->srv->cfg.ws_port, "path", HUB_STREAM_PATH,
                                    "protocol", HUB_STREAM_SUBPROTOCOL));
}
