/* cli_util.h — what the CLI commands (tools/, tools/demo) share: reading a config file,
 * fetching a JSON document from the client (cli_util.c), and clocks, sleeps and bounded
 * waits (inline). Tools link against the amalgamation, where common/fx.h's
 * fx_deadline_ts and fx_cond_init_monotonic are static, so the waits are their
 * tools-side copy: every deadline on CLOCK_MONOTONIC (a wall-clock step neither
 * stretches nor cuts a wait). Public API and libc only. */
#ifndef FX_CLI_UTIL_H
#define FX_CLI_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_clockjoin_np */
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "fluxon.h"

/* Reads the config file at path (at most 16 MiB) into a NUL-terminated malloc'ed string;
 * NULL after a message prefixed by who ("fluxon", "fluxon demo") naming the path and why
 * (a directory, cannot be read, too large). */
char *fx_cli_read_config(const char *who, const char *path);

/* An option's value: a decimal integer in min..max, or with units (a size) ending in B, KiB,
 * MiB, GiB (powers of 1024) or KB, MB, GB (of 1000), as the config's sizes do. 0 and *out
 * set; -1 after printing "fluxon WHO: OPT S: must be ..." on stderr. */
/* This host's physical memory in bytes (0: unknown): the demo's and the benchmarks' size checks. */
uint64_t fx_cli_host_ram(void);

int fx_cli_parse_u64(const char *who, const char *opt, const char *s, uint64_t min, uint64_t max, int units,
                     uint64_t *out);

/* A fluxon_client_* call that writes a JSON document into (buf, cap, &len). */
typedef int (*fx_cli_json_fn)(fluxon_client *c, char *buf, size_t cap, size_t *len_p);

/* Calls fn into a malloc'ed buffer of cap bytes, and once more with the size fn asked for
 * when that was too small. FLUXON_OK with *buf_p the document (caller frees), or fn's
 * status (FLUXON_ERR_NOMEM when no buffer) with *buf_p NULL. */
int fx_cli_json_call(fluxon_client *c, fx_cli_json_fn fn, size_t cap, char **buf_p);

/* After a command failed with rc UNAVAILABLE or UNKNOWN_OUTCOME: when the client's owner
 * is not connected to its master, says so on stderr ("fluxon: WHAT: owner ID is not
 * connected to its master ..."); otherwise nothing. */
void fx_cli_explain_unavailable(fluxon_client *c, const char *what, int rc);

/* The external's timeout_ms as its config set it (30000 when it did not): `fluxon
 * --role=external` sets it before the command runs; a command's own waits (a future's)
 * take it as their bound, like the client's calls. */
extern unsigned fx_cli_timeout_ms;

static inline uint64_t fx_cli_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* sleeps ms milliseconds, resumed after a signal */
static inline void fx_cli_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* now + ms as an absolute CLOCK_MONOTONIC time */
static inline struct timespec fx_cli_deadline_ts(uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (ms % 1000u) * 1000000u;
    ts.tv_sec += (time_t)(ms / 1000u + ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

/* a condition variable whose timed waits run on CLOCK_MONOTONIC; 0 or an errno */
static inline int fx_cli_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

/* one wait of at most ms on c (made by fx_cli_cond_init_monotonic), mu held; the caller
 * re-checks its condition: 0 signalled (or spurious), ETIMEDOUT */
static inline int fx_cli_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *mu, uint64_t ms)
{
    struct timespec dl = fx_cli_deadline_ts(ms);
    return pthread_cond_timedwait(c, mu, &dl);
}

/* joins t within ms: 0, or ETIMEDOUT (the thread still runs) */
static inline int fx_cli_join_ms(pthread_t t, uint64_t ms)
{
    struct timespec dl = fx_cli_deadline_ts(ms);
#if defined(__SANITIZE_THREAD__)
    /* make tsan: TSan intercepts pthread_tryjoin_np but not pthread_clockjoin_np (it would
     * not see the join); poll it against the same monotonic deadline */
    for (;;) {
        int rc = pthread_tryjoin_np(t, NULL);
        if (rc != EBUSY) return rc;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > dl.tv_sec || (now.tv_sec == dl.tv_sec && now.tv_nsec >= dl.tv_nsec)) return ETIMEDOUT;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
#else
    return pthread_clockjoin_np(t, NULL, CLOCK_MONOTONIC, &dl);
#endif
}

/* Waits (bounded by timeout_ms in all) until the prefault threads are done: each node's
 * (owners and masters: heap_prefaulting 0 in its metrics and, for an owner,
 * segment_prefaulting 0; n_nodes may be 0) and each client's (its stats), so that a
 * measurement does not run beside them. 0 when all are done, -1 when
 * the time ran out, a state could not be read, or *stop (NULL: none) became nonzero (a
 * signal handler's flag). */
int fx_cli_wait_prefault(fluxon_node *const *nodes, unsigned n_nodes, fluxon_client *const *clients,
                         unsigned n_clients, unsigned timeout_ms, const volatile sig_atomic_t *stop);

#endif /* FX_CLI_UTIL_H */
