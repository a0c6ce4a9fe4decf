/* Loaded with LD_PRELOAD into a `python -m modern.service` process (modern/bind.py builds and
 * loads it): a socket bound to the wildcard address -- what TensorFlow's tf.data service
 * servers always ask for ("0.0.0.0:PORT", which gRPC makes a dual-stack "[::]:PORT") -- is
 * bound to the address in MODERN_SERVICE_BIND instead, same port:
 *
 *   IPv4 address A.B.C.D: an IPv4 socket binds A.B.C.D; an IPv6 socket binds ::ffff:A.B.C.D
 *     (its v4-mapped form, which accepts that IPv4 address only);
 *   IPv6 address (scope too, fe80::1%eth0): an IPv6 socket binds it; an IPv4 socket cannot,
 *     so its wildcard bind fails (EADDRNOTAVAIL) rather than listen wider.
 *
 * Every other bind (a given address, Unix sockets) is passed on unchanged. The address is read
 * once, when the library loads; then MODERN_SERVICE_BIND, MODERN_SERVICE_BIND_EXEC and this
 * library's own entry in LD_PRELOAD are taken out of the environment, so nothing the server
 * starts inherits the shim. modern/bind.py asks the loaded shim what it narrows to
 * (modern_bind_shim_address) and why a narrowed bind failed (modern_bind_shim_last_error). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static bind_fn real_bind;
static struct sockaddr_storage wanted; /* ss_family AF_UNSPEC: no usable address given */
static char wanted_text[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
static volatile int last_error;

static void forget_preload(void);

__attribute__((constructor)) static void init(void) {
    real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    const char *text = getenv("MODERN_SERVICE_BIND");
    struct addrinfo hints, *found = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_NUMERICHOST;
    hints.ai_socktype = SOCK_STREAM;
    if (text && strlen(text) < sizeof wanted_text &&
        getaddrinfo(text, NULL, &hints, &found) == 0 && found &&
        found->ai_addrlen <= sizeof wanted) {
        memcpy(&wanted, found->ai_addr, found->ai_addrlen);
        strcpy(wanted_text, text);
    }
    if (found) freeaddrinfo(found);
    unsetenv("MODERN_SERVICE_BIND");
    unsetenv("MODERN_SERVICE_BIND_EXEC");
    forget_preload();
}

/* LD_PRELOAD without this library (entries are separated by spaces or colons). */
static void forget_preload(void) {
    Dl_info self;
    const char *preload = getenv("LD_PRELOAD");
    if (!preload || !dladdr((void *)&init, &self) || !self.dli_fname) return;
    size_t own = strlen(self.dli_fname), k = 0;
    char *kept = malloc(strlen(preload) + 1);
    if (!kept) return;
    for (const char *p = preload; *p;) {
        size_t len = strcspn(p, " :");
        if (len && !(len == own && strncmp(p, self.dli_fname, len) == 0)) {
            if (k) kept[k++] = ' ';
            memcpy(kept + k, p, len);
            k += len;
        }
        p += len;
        if (*p) p++;
    }
    kept[k] = '\0';
    if (k) setenv("LD_PRELOAD", kept, 1);
    else unsetenv("LD_PRELOAD");
    free(kept);
}

/* The address wildcard binds are narrowed to, as given; -1 when there is none. */
int modern_bind_shim_address(char *out, size_t size) {
    if (wanted.ss_family == AF_UNSPEC || strlen(wanted_text) >= size) return -1;
    strcpy(out, wanted_text);
    return 0;
}

/* errno of the last narrowed bind that failed (EADDRINUSE, EADDRNOTAVAIL, ...), or 0. */
int modern_bind_shim_last_error(void) { return last_error; }

static int narrowed(int fd, struct sockaddr_storage *a, socklen_t len) {
    int rc = real_bind(fd, (const struct sockaddr *)a, len);
    if (rc != 0) last_error = errno;
    return rc;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (wanted.ss_family == AF_UNSPEC || !addr) return real_bind(fd, addr, len);
    struct sockaddr_storage a;
    if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
        memcpy(v4, addr, sizeof *v4);
        if (v4->sin_addr.s_addr != htonl(INADDR_ANY)) return real_bind(fd, addr, len);
        if (wanted.ss_family != AF_INET) { /* an IPv6 address cannot be had on this socket */
            last_error = errno = EADDRNOTAVAIL;
            return -1;
        }
        v4->sin_addr = ((struct sockaddr_in *)&wanted)->sin_addr;
        return narrowed(fd, &a, sizeof *v4);
    }
    if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
        memcpy(v6, addr, sizeof *v6);
        if (!IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr)) return real_bind(fd, addr, len);
        if (wanted.ss_family == AF_INET6) {
            v6->sin6_addr = ((struct sockaddr_in6 *)&wanted)->sin6_addr;
            v6->sin6_scope_id = ((struct sockaddr_in6 *)&wanted)->sin6_scope_id;
        } else {
            memset(&v6->sin6_addr, 0, sizeof v6->sin6_addr);
            v6->sin6_addr.s6_addr[10] = 0xff;
            v6->sin6_addr.s6_addr[11] = 0xff;
            memcpy(&v6->sin6_addr.s6_addr[12], &((struct sockaddr_in *)&wanted)->sin_addr, 4);
        }
        return narrowed(fd, &a, sizeof *v6);
    }
    return real_bind(fd, addr, len);
}
