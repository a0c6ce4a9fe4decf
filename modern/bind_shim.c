/* Loaded with LD_PRELOAD into a `python -m modern.service` process (modern/bind.py builds and
 * loads it): a socket bound to the wildcard address -- what TensorFlow's tf.data service
 * servers always ask for ("0.0.0.0:PORT", which gRPC makes a dual-stack "[::]:PORT") -- is
 * bound to the IPv4 address in MODERN_SERVICE_BIND instead; on an IPv6 socket as its
 * v4-mapped form (::ffff:A.B.C.D), which accepts that IPv4 address only. Every other bind
 * (a given address, Unix sockets, no MODERN_SERVICE_BIND) is passed on unchanged. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    const char *wanted = getenv("MODERN_SERVICE_BIND");
    struct in_addr v4;
    if (!wanted || !addr || inet_pton(AF_INET, wanted, &v4) != 1)
        return real_bind(fd, addr, len);
    if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
            a.sin_addr = v4;
            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
        }
    } else if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
            memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
            a.sin6_addr.s6_addr[10] = 0xff;
            a.sin6_addr.s6_addr[11] = 0xff;
            memcpy(&a.sin6_addr.s6_addr[12], &v4, sizeof v4);
            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
        }
    }
    return real_bind(fd, addr, len);
}
