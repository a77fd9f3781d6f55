/* The artifact store's backend-independent part: validation and error texts. */
#include "artifact.h"

#include <stdlib.h>
#include <string.h>

int artifact_key_valid(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (n == 0 || n > 200 || key[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = key[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

int artifact_sha256_valid(const char *hex)
{
    if (hex == NULL || strlen(hex) != 64)
        return 0;
    for (size_t i = 0; i < 64; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
            return 0;
    return 1;
}

const char *artifact_strerror(int code)
{
    switch (code) {
    case ARTIFACT_EOFFSET:
        return "the offset is not where the stored bytes end";
    case ARTIFACT_ECORRUPT:
        return "the stored bytes do not match the SHA-256 given";
    case ARTIFACT_ENOTFOUND:
        return "no such upload or object";
    case ARTIFACT_EINVAL:
        return "malformed key, hash or location";
    case ARTIFACT_EBUSY:
        return "another request is writing this upload";
    default:
        return "the artifact store failed (disk full or unwritable?)";
    }
}

int artifact_append(struct artifact_store *st, const char *key, int64_t offset, const void *data,
                    size_t len, int64_t *size)
{
    struct artifact_append *ap = NULL;
    int rc = st->ops->append_begin(st->be, key, offset, &ap, size);
    if (rc != 0)
        return rc;
    rc = st->ops->append_data(ap, data, len);
    int end = st->ops->append_end(ap, rc == 0, size);
    return rc != 0 ? rc : end;
}

void artifact_store_close(struct artifact_store *st)
{
    if (st == NULL)
        return;
    if (st->ops && st->ops->destroy)
        st->ops->destroy(st->be);
    free(st);
}
