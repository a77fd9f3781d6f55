/* GET /api/v1/version */
#include "handlers.h"
#include "version.h"

enum MHD_Result h_version(struct srv_request *req)
{
    return srv_reply_json(req, MHD_HTTP_OK,
                          json_pack("{s:s, s:s}", "version", TRAINYARD_VERSION, "api", "v1"));
}
