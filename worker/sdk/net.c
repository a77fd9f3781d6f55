/*
 * net.c — TCP helpers with deadlines: every wait is a poll() bounded by a monotonic deadline,
 * so no call can hang past its timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "util.h"

int ty__ms_left(int64_t deadline_ms)
{
    int64_t left = deadline_ms - util_mono_ms();
    if (left < 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

int ty__set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return TY_EIO;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return TY_EIO;
    return 0;
}

/* Map a socket errno to a TY code. */
static int net_errno_code(int e)
{
    switch (e) {
    case EPIPE:
    case ECONNRESET:
    case ECONNREFUSED:
    case ENOTCONN:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return TY_EPEER;
    case ETIMEDOUT:
        return TY_ETIMEDOUT;
    default:
        return TY_EIO;
    }
}

/* poll one fd until deadline: 0 ready, TY_ETIMEDOUT, TY_EIO. */
static int net_wait(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int left = ty__ms_left(deadline_ms);
        if (left == 0)
            return TY_ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return TY_EIO;
    }
}

int ty__send_all(int fd, const void *buf, size_t n, int64_t deadline_ms)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = net_wait(fd, POLLOUT, deadline_ms);
            if (rc < 0)
                return rc;
        } else {
            return net_errno_code(errno);
        }
    }
    return 0;
}

int ty__recv_all(int fd, void *buf, size_t n, int64_t deadline_ms)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r == 0) {
            return TY_EPEER;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = net_wait(fd, POLLIN, deadline_ms);
            if (rc < 0)
                return rc;
        } else {
            return net_errno_code(errno);
        }
    }
    return 0;
}

int ty__tcp_connect(const struct sockaddr *addr, socklen_t len, int64_t deadline_ms)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return TY_EIO;
    if (connect(fd, addr, len) < 0) {
        if (errno != EINPROGRESS) {
            int rc = net_errno_code(errno);
            close(fd);
            return rc;
        }
        int rc = net_wait(fd, POLLOUT, deadline_ms);
        if (rc < 0) {
            close(fd);
            return rc;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
            close(fd);
            return net_errno_code(soerr ? soerr : errno);
        }
    }
    return fd;
}

int ty__tcp_accept(int lfd, int64_t deadline_ms)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            return fd;
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return TY_EIO;
        int rc = net_wait(lfd, POLLIN, deadline_ms);
        if (rc < 0)
            return rc;
    }
}

void ty__tune_link(int fd, int sockbuf)
{
    int one = 1;
    /* Best effort: a kernel that refuses big buffers just runs slower. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (sockbuf > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf);
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf);
    }
    (void)ty__set_nonblock(fd);
}

void ty__put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

void ty__put_u32(unsigned char *p, uint32_t v)
{
    ty__put_u16(p, (uint16_t)(v >> 16));
    ty__put_u16(p + 2, (uint16_t)v);
}

void ty__put_u64(unsigned char *p, uint64_t v)
{
    ty__put_u32(p, (uint32_t)(v >> 32));
    ty__put_u32(p + 4, (uint32_t)v);
}

uint16_t ty__get_u16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

uint32_t ty__get_u32(const unsigned char *p)
{
    return ((uint32_t)ty__get_u16(p) << 16) | ty__get_u16(p + 2);
}

uint64_t ty__get_u64(const unsigned char *p)
{
    return ((uint64_t)ty__get_u32(p) << 32) | ty__get_u32(p + 4);
}
