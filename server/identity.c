/* Role names (identity.h). */
#include "identity.h"

#include <string.h>

static const char *const role_names[] = {"none", "viewer", "user", "admin"};

const char *srv_role_name(enum srv_role role)
{
    return role_names[role];
}

int srv_role_from_string(const char *name, enum srv_role *out)
{
    for (int i = SRV_ROLE_VIEWER; i <= SRV_ROLE_ADMIN; i++) {
        if (name && strcmp(name, role_names[i]) == 0) {
            *out = (enum srv_role)i;
            return 0;
        }
    }
    return -1;
}
