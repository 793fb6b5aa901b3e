/* cli_metrics.c — the /metrics HTTP endpoint (cli_metrics.h) on libmicrohttpd. The socket
 * is bound here first, so a bad address or a port in use is reported by its name before
 * any thread starts; microhttpd then serves it from its internal polling thread (epoll). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli_metrics.h"

#define METRICS_MAX_NODES 64
#define METRICS_BUF_START (256u << 10)
#define METRICS_BUF_MAX (64u << 20)

struct fx_cli_metrics {
    struct MHD_Daemon *d;
    fluxon_node *nodes[METRICS_MAX_NODES];
    size_t n;
};

static enum MHD_Result metrics_reply(struct MHD_Connection *c, unsigned code, const char *type, char *body,
                                     size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result metrics_text(struct MHD_Connection *c, unsigned code, const char *msg)
{
    char *b = strdup(msg);
    return b ? metrics_reply(c, code, "text/plain; charset=utf-8", b, strlen(b)) : MHD_NO;
}

static enum MHD_Result metrics_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                       const char *version, const char *upload, size_t *upload_len, void **state)
{
    fx_cli_metrics *s = cls;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return metrics_text(c, 405, "only GET /metrics\n");
    if (strcmp(url, "/metrics")) return metrics_text(c, 404, "not found: this server serves GET /metrics\n");
    for (size_t cap = METRICS_BUF_START; cap <= METRICS_BUF_MAX; cap *= 2) {
        char *buf = malloc(cap);
        if (!buf) break;
        size_t len = 0;
        int rc = fluxon_nodes_metrics(s->nodes, s->n, buf, cap, &len);
        if (rc == FLUXON_OK) return metrics_reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", buf, len);
        free(buf);
        if (rc != FLUXON_ERR_NO_SPACE) {
            char msg[160];
            snprintf(msg, sizeof msg, "metrics unavailable: %s\n", fluxon_status_string(rc));
            return metrics_text(c, 503, msg);
        }
    }
    return metrics_text(c, 500, "metrics: out of memory\n");
}

/* Who speaks: the demo's flags start with "--" (its messages say "fluxon demo:"). */
static const char *metrics_who(const char *field) { return field[0] == '-' ? "fluxon demo" : "fluxon"; }

/* "host:port" -> a listening socket; -1 after a message naming field and value */
static int metrics_bind(const char *field, const char *listen_addr, char *host_out, size_t host_cap, uint16_t *port_p)
{
    char host[256];
    const char *colon = strrchr(listen_addr, ':');
    size_t hl = colon ? (size_t)(colon - listen_addr) : 0;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || hl == 0 || hl >= sizeof host || !colon[1] || *end || port < 0 || port > 65535) {
        fprintf(stderr, "%s: %s: \"%s\" is not host:port (port 0..65535)\n", metrics_who(field), field, listen_addr);
        return -1;
    }
    memcpy(host, listen_addr, hl);
    host[hl] = 0;
    if (host[0] == '[' && host[hl - 1] == ']') { /* [::1]:9100 */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &ai);
    if (g != 0 || !ai) {
        fprintf(stderr, "%s: %s: cannot resolve host \"%s\" of \"%s\": %s\n", metrics_who(field), field, host, listen_addr,
                gai_strerror(g));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, err = 0;
    if (fd < 0) err = errno;
    else setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0)) err = errno;
    freeaddrinfo(ai);
    if (err) {
        fprintf(stderr, "%s: %s: cannot listen on \"%s\": %s\n", metrics_who(field), field, listen_addr, strerror(err));
        if (fd >= 0) close(fd);
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *port_p = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    snprintf(host_out, host_cap, "%s", host);
    return fd;
}

/* microhttpd's own messages (a client closing early, an unreadable request): anyone who
 * can connect can cause them, so only the first 10 and then one in 1000 reach the log */
static void metrics_mhd_log(void *cls, const char *fmt, va_list ap)
{
    static unsigned long seen;
    unsigned long n = __atomic_fetch_add(&seen, 1, __ATOMIC_RELAXED);
    if (n >= 10 && n % 1000) return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    fprintf(stderr, "fluxon: metrics: %s (HTTP server message %lu)\n", line, n + 1);
}

fx_cli_metrics *fx_cli_metrics_start(const char *field, const char *listen_addr, fluxon_node *const *nodes, size_t n,
                                     uint16_t *port_p)
{
    if (!n || n > METRICS_MAX_NODES) {
        fprintf(stderr, "%s: %s: %zu nodes to serve (1..%d)\n", metrics_who(field), field, n, METRICS_MAX_NODES);
        return NULL;
    }
    char host[256];
    uint16_t port = 0;
    int fd = metrics_bind(field, listen_addr, host, sizeof host, &port);
    if (fd < 0) return NULL;
    fx_cli_metrics *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return NULL;
    }
    memcpy(s->nodes, nodes, n * sizeof *nodes);
    s->n = n;
    /* epoll, not select: a process with more than FD_SETSIZE descriptors (an owner with
     * hundreds of clients) still serves scrapes; at most 256 scrapers at once */
    s->d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, metrics_handler, s,
                            /* the logger first: libmicrohttpd warns about any option before it */
                            MHD_OPTION_EXTERNAL_LOGGER, metrics_mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
                            MHD_OPTION_END);
    if (!s->d) {
        fprintf(stderr, "%s: %s: the HTTP server on \"%s\" did not start\n", metrics_who(field), field, listen_addr);
        close(fd);
        free(s);
        return NULL;
    }
    fprintf(stderr, "fluxon: metrics on http://%s:%u/metrics\n", host, port);
    if (port_p) *port_p = port;
    return s;
}

void fx_cli_metrics_stop(fx_cli_metrics *s)
{
    if (!s) return;
    MHD_stop_daemon(s->d); /* closes the listen socket it was given too */
    free(s);
}
