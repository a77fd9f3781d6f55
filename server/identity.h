/* Who makes a request: roles and the identity a bearer token stands for. A neutral header, so
 * that the HTTP layer (http.h) and the store (store.h) share it without either including the
 * other. */
#ifndef SRV_IDENTITY_H
#define SRV_IDENTITY_H

#include <stdint.h>

/* Ordered: a role may do everything a lower one may. */
enum srv_role { SRV_ROLE_NONE = 0, SRV_ROLE_VIEWER = 1, SRV_ROLE_USER = 2, SRV_ROLE_ADMIN = 3 };

/* Who made the request (filled by auth.c). */
struct srv_identity {
    enum srv_role role;
    char name[129];
    int64_t token_id; /* 0 with --auth none */
};

/* "none", "viewer", "user" or "admin". */
const char *srv_role_name(enum srv_role role);
/* Parses "viewer", "user" or "admin" (exact case; "none" is not a role a token can have).
 * Returns 0, or -1 for anything else (NULL included) with *out untouched. */
int srv_role_from_string(const char *name, enum srv_role *out);

#endif
