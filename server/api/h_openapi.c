/* GET /api/v1/openapi.json: the OpenAPI 3.1 document (server/api/openapi.json, compiled in). */
#include "embed.h"
#include "handlers.h"

extern const struct ty_embedded_file srv_openapi_files[];

enum MHD_Result h_openapi(struct srv_request *req)
{
    const struct ty_embedded_file *f = &srv_openapi_files[0];
    return srv_reply_data(req, MHD_HTTP_OK, "application/json", (const char *)f->data, f->size);
}
