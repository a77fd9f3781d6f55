/* libcurl and libarchive, loaded at their first use instead of at the agent's start.
 *
 * The agent needs them only to upload and fetch (checkpoints, code packages, logs) and to
 * unpack, never to start and register; linked, they and what they pull in are 40 of the 49
 * shared libraries the dynamic loader maps before main(), about two thirds of an agent's start
 * (docs/benchmarks.md, "Slurm"): an agent that Slurm starts for one job waits on that before it
 * can register. So the agent links neither: the functions it calls are defined here, with the
 * libraries' own prototypes (the headers are included, their type checks included), and forward
 * to the real ones, dlopen'ed once (pthread_once) by the first call that can start a use: a
 * handle's creation (curl_easy_init, archive_read_new, archive_write_disk_new) or a free-standing
 * call (curl_slist_append, curl_easy_strerror). The others take a handle, which exists only once
 * its library is loaded. A library that cannot be loaded is logged once; the creating calls then
 * return NULL, which their callers treat as a failed upload, fetch or unpack.
 *
 * The variadic ones, curl_easy_setopt and curl_easy_getinfo, take their one argument by the
 * type curl's own option and info numbering gives it (curl's setopt.c does the same), and pass
 * it on as that type. agent__iolib_load_archive() is for a caller about to fork a child that will
 * use libarchive: loading in the child after a fork of this multi-threaded process is unsafe. */
#include "agent.h"

#include "log.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>

/* The ABIs the headers describe: libcurl's soname has been 4 since 7.16 (2006), libarchive's 13
 * since 3.0 (2012). */
#define IOLIB_CURL "libcurl.so.4"
#define IOLIB_ARCHIVE "libarchive.so.13"

/* X(name): every function forwarded, with its header's type. */
#define IOLIB_CURL_FNS(X)                                                                          \
    X(curl_easy_init)                                                                              \
    X(curl_easy_cleanup)                                                                           \
    X(curl_easy_reset)                                                                             \
    X(curl_easy_perform)                                                                           \
    X(curl_easy_setopt)                                                                            \
    X(curl_easy_getinfo)                                                                           \
    X(curl_easy_strerror)                                                                          \
    X(curl_slist_append)                                                                           \
    X(curl_slist_free_all)
#define IOLIB_ARCHIVE_FNS(X)                                                                       \
    X(archive_read_new)                                                                            \
    X(archive_read_free)                                                                           \
    X(archive_read_support_filter_gzip)                                                            \
    X(archive_read_support_filter_bzip2)                                                           \
    X(archive_read_support_filter_xz)                                                              \
    X(archive_read_support_format_tar)                                                             \
    X(archive_read_open_fd)                                                                        \
    X(archive_read_next_header)                                                                    \
    X(archive_read_data_block)                                                                     \
    X(archive_write_disk_new)                                                                      \
    X(archive_write_disk_set_options)                                                              \
    X(archive_write_header)                                                                        \
    X(archive_write_data_block)                                                                    \
    X(archive_write_finish_entry)                                                                  \
    X(archive_write_close)                                                                         \
    X(archive_write_free)                                                                          \
    X(archive_errno)                                                                               \
    X(archive_error_string)                                                                        \
    X(archive_entry_pathname)                                                                      \
    X(archive_entry_filetype)                                                                      \
    X(archive_entry_perm)                                                                          \
    X(archive_entry_size)                                                                          \
    X(archive_entry_symlink)                                                                       \
    X(archive_entry_hardlink)                                                                      \
    X(archive_entry_set_perm)                                                                      \
    X(archive_entry_set_fflags)                                                                    \
    X(archive_entry_acl_clear)                                                                     \
    X(archive_entry_xattr_clear)

#define IOLIB_FIELD(name) __typeof__(&name) p_##name;
static struct {
    IOLIB_CURL_FNS(IOLIB_FIELD)
} curl_api;
static struct {
    IOLIB_ARCHIVE_FNS(IOLIB_FIELD)
} archive_api;
#undef IOLIB_FIELD

static pthread_once_t curl_once = PTHREAD_ONCE_INIT, archive_once = PTHREAD_ONCE_INIT;
static bool curl_ok, archive_ok;

/* dlopens `file`; NULL logged. The library stays loaded for the agent's life. */
static void *open_lib(const char *file)
{
    void *lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        TY_ERROR("agent", "cannot load %s (uploads, fetches and unpacking fail): %s", file,
                 dlerror());
    return lib;
}

/* Symbol `name` of `lib`, or NULL (logged; *ok becomes false). */
static void *sym(void *lib, const char *file, const char *name, bool *ok)
{
    void *p = dlsym(lib, name);
    if (p == NULL) {
        TY_ERROR("agent", "%s has no %s (uploads, fetches and unpacking fail)", file, name);
        *ok = false;
    }
    return p;
}

static void load_curl(void)
{
    void *lib = open_lib(IOLIB_CURL);
    bool ok = lib != NULL;
#define IOLIB_SYM(name) *(void **)&curl_api.p_##name = ok ? sym(lib, IOLIB_CURL, #name, &ok) : NULL;
    IOLIB_CURL_FNS(IOLIB_SYM)
#undef IOLIB_SYM
    curl_ok = ok;
}

static void load_archive(void)
{
    void *lib = open_lib(IOLIB_ARCHIVE);
    bool ok = lib != NULL;
#define IOLIB_SYM(name)                                                                            \
    *(void **)&archive_api.p_##name = ok ? sym(lib, IOLIB_ARCHIVE, #name, &ok) : NULL;
    IOLIB_ARCHIVE_FNS(IOLIB_SYM)
#undef IOLIB_SYM
    archive_ok = ok;
}

static bool curl_loaded(void)
{
    pthread_once(&curl_once, load_curl);
    return curl_ok;
}

int agent__iolib_load_archive(void)
{
    pthread_once(&archive_once, load_archive);
    return archive_ok ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* libcurl                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* The names in parentheses: curl's headers may define function-like macros of them (its
 * compile-time type checks), which must not expand here. */
CURL *(curl_easy_init)(void)
{
    return curl_loaded() ? curl_api.p_curl_easy_init() : NULL;
}

void(curl_easy_cleanup)(CURL *h)
{
    if (h)
        curl_api.p_curl_easy_cleanup(h);
}

void(curl_easy_reset)(CURL *h)
{
    curl_api.p_curl_easy_reset(h);
}

CURLcode(curl_easy_perform)(CURL *h)
{
    return curl_api.p_curl_easy_perform(h);
}

CURLcode(curl_easy_setopt)(CURL *h, CURLoption option, ...)
{
    va_list ap;
    va_start(ap, option);
    CURLcode rc;
    if (option < CURLOPTTYPE_OBJECTPOINT)
        rc = curl_api.p_curl_easy_setopt(h, option, va_arg(ap, long));
    else if (option < CURLOPTTYPE_FUNCTIONPOINT)
        rc = curl_api.p_curl_easy_setopt(h, option, va_arg(ap, void *));
    else if (option < CURLOPTTYPE_OFF_T)
        rc = curl_api.p_curl_easy_setopt(h, option, va_arg(ap, void (*)(void)));
    else if (option < CURLOPTTYPE_BLOB)
        rc = curl_api.p_curl_easy_setopt(h, option, va_arg(ap, curl_off_t));
    else
        rc = curl_api.p_curl_easy_setopt(h, option, va_arg(ap, void *));
    va_end(ap);
    return rc;
}

CURLcode(curl_easy_getinfo)(CURL *h, CURLINFO info, ...)
{
    va_list ap;
    va_start(ap, info);
    CURLcode rc = curl_api.p_curl_easy_getinfo(h, info, va_arg(ap, void *)); /* always a pointer */
    va_end(ap);
    return rc;
}

const char *(curl_easy_strerror)(CURLcode code)
{
    return curl_loaded() ? curl_api.p_curl_easy_strerror(code) : "libcurl could not be loaded";
}

struct curl_slist *(curl_slist_append)(struct curl_slist *list, const char *s)
{
    return curl_loaded() ? curl_api.p_curl_slist_append(list, s) : NULL;
}

void(curl_slist_free_all)(struct curl_slist *list)
{
    if (list)
        curl_api.p_curl_slist_free_all(list);
}

/* ------------------------------------------------------------------------------------------ */
/* libarchive                                                                                   */
/* ------------------------------------------------------------------------------------------ */

struct archive *archive_read_new(void)
{
    return agent__iolib_load_archive() == 0 ? archive_api.p_archive_read_new() : NULL;
}

struct archive *archive_write_disk_new(void)
{
    return agent__iolib_load_archive() == 0 ? archive_api.p_archive_write_disk_new() : NULL;
}

int archive_read_free(struct archive *a)
{
    return a ? archive_api.p_archive_read_free(a) : ARCHIVE_OK;
}

int archive_write_free(struct archive *a)
{
    return a ? archive_api.p_archive_write_free(a) : ARCHIVE_OK;
}

/* The others take a handle: their library is loaded. */
#define IOLIB_FWD(ret, name, params, args)                                                         \
    ret name params                                                                                \
    {                                                                                              \
        return archive_api.p_##name args;                                                          \
    }
#define IOLIB_FWD_VOID(name, params, args)                                                         \
    void name params                                                                               \
    {                                                                                              \
        archive_api.p_##name args;                                                                 \
    }
typedef struct archive A;
typedef struct archive_entry E;
IOLIB_FWD(int, archive_read_support_filter_gzip, (A * a), (a))
IOLIB_FWD(int, archive_read_support_filter_bzip2, (A * a), (a))
IOLIB_FWD(int, archive_read_support_filter_xz, (A * a), (a))
IOLIB_FWD(int, archive_read_support_format_tar, (A * a), (a))
IOLIB_FWD(int, archive_read_open_fd, (A * a, int fd, size_t block), (a, fd, block))
IOLIB_FWD(int, archive_read_next_header, (A * a, E **e), (a, e))
IOLIB_FWD(int, archive_read_data_block, (A * a, const void **buf, size_t *size, la_int64_t *off),
          (a, buf, size, off))
IOLIB_FWD(int, archive_write_disk_set_options, (A * a, int flags), (a, flags))
IOLIB_FWD(int, archive_write_header, (A * a, E *e), (a, e))
IOLIB_FWD(la_ssize_t, archive_write_data_block,
          (A * a, const void *buf, size_t size, la_int64_t off), (a, buf, size, off))
IOLIB_FWD(int, archive_write_finish_entry, (A * a), (a))
IOLIB_FWD(int, archive_write_close, (A * a), (a))
IOLIB_FWD(int, archive_errno, (A * a), (a))
IOLIB_FWD(const char *, archive_error_string, (A * a), (a))
IOLIB_FWD(const char *, archive_entry_pathname, (E * e), (e))
IOLIB_FWD(__LA_MODE_T, archive_entry_filetype, (E * e), (e))
IOLIB_FWD(__LA_MODE_T, archive_entry_perm, (E * e), (e))
IOLIB_FWD(la_int64_t, archive_entry_size, (E * e), (e))
IOLIB_FWD(const char *, archive_entry_symlink, (E * e), (e))
IOLIB_FWD(const char *, archive_entry_hardlink, (E * e), (e))
IOLIB_FWD_VOID(archive_entry_set_perm, (E * e, __LA_MODE_T mode), (e, mode))
IOLIB_FWD_VOID(archive_entry_set_fflags, (E * e, unsigned long set, unsigned long clear),
               (e, set, clear))
IOLIB_FWD_VOID(archive_entry_acl_clear, (E * e), (e))
IOLIB_FWD_VOID(archive_entry_xattr_clear, (E * e), (e))
