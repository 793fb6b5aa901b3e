/* etcd.h — a small client of etcd's v3 HTTP/JSON gateway (libcurl), for the masters'
 * leader election and the owners' leader lookup (issue 17): leases (grant, keepalive,
 * revoke) and etcd's own election API (campaign, leader). Keys and values travel base64
 * as the gateway wants them. Every call blocks its caller (never a reactor thread) for
 * at most its timeout; endpoints are tried in turn, the one that answered is kept. */
#ifndef FX_ETCD_H
#define FX_ETCD_H

#include "fx.h"

typedef struct fx_etcd fx_etcd_t;

#define FX_ETCD_ENDPOINTS_MAX 8
#define FX_ETCD_VALUE_MAX 128
#define FX_ETCD_WAITING 1

/* endpoints: "http://host:port[,http://host:port...]" (checked by the config). */
FX_INTERNAL int fx_etcd_new(const char *endpoints, fx_etcd_t **e_p);
FX_INTERNAL void fx_etcd_free(fx_etcd_t *e);
/* The endpoint last used (for messages). */
FX_INTERNAL const char *fx_etcd_endpoint(const fx_etcd_t *e);

/* POST /v3/lease/grant: *id and the TTL etcd granted (it may raise ttl_s to its minimum). */
FX_INTERNAL int fx_etcd_lease_grant(fx_etcd_t *e, uint32_t ttl_s, uint32_t timeout_ms, int64_t *id,
                                    uint32_t *granted_s, char *err, size_t errcap);
/* POST /v3/lease/keepalive: FLUXON_OK and the TTL renewed; FLUXON_ERR_NOT_FOUND when
 * etcd no longer knows the lease (expired or revoked); other codes: etcd not reached. */
FX_INTERNAL int fx_etcd_lease_keepalive(fx_etcd_t *e, int64_t id, uint32_t timeout_ms, uint32_t *ttl_s,
                                        char *err, size_t errcap);
FX_INTERNAL int fx_etcd_lease_revoke(fx_etcd_t *e, int64_t id, uint32_t timeout_ms);

/* The leader of election `name`: its value (NUL-terminated, cap bytes) and its key's
 * create revision; FLUXON_ERR_NOT_FOUND when the election has no leader. */
FX_INTERNAL int fx_etcd_leader(fx_etcd_t *e, const char *name, uint32_t timeout_ms, char *value, size_t cap,
                               int64_t *rev, char *err, size_t errcap);

/* The lease of the leader key of election `name` (*lease; *rev its create revision);
 * FLUXON_ERR_NOT_FOUND when the election has no leader. */
FX_INTERNAL int fx_etcd_leader_lease(fx_etcd_t *e, const char *name, uint32_t timeout_ms, int64_t *lease,
                                     int64_t *rev, char *err, size_t errcap);

/* A plain key (/v3/kv/range, /v3/kv/put; no lease: it outlives its writer). get: the value
 * (NUL-terminated, at most cap-1 bytes) or FLUXON_ERR_NOT_FOUND when the key has none;
 * FLUXON_ERR_PROTOCOL with an err saying "longer than" when the value (or etcd's answer,
 * at most 64 KiB) is longer than that. put: a value of at most FX_ETCD_PUT_MAX bytes (else
 * INVALID_ARGUMENT), which get reads back whole. */
#define FX_ETCD_PUT_MAX 16384u
FX_INTERNAL int fx_etcd_get(fx_etcd_t *e, const char *key, uint32_t timeout_ms, char *value, size_t cap, char *err,
                            size_t errcap);
FX_INTERNAL int fx_etcd_put(fx_etcd_t *e, const char *key, const char *value, uint32_t timeout_ms, char *err,
                            size_t errcap);

/* A campaign (POST /v3/election/campaign) blocks in etcd until this candidate leads, so
 * it runs asynchronously: start it, then poll (which also sleeps up to wait_ms, woken
 * early by fx_etcd_wakeup from any thread). Poll returns FX_ETCD_WAITING while the
 * campaign waits, FLUXON_OK when elected (*rev: the leader key's create revision), or an
 * error. Cancelling drops the request: etcd withdraws the candidacy. One at a time.
 * timeout_ms bounds the request (H1: a connection that died silently is not waited on
 * for ever; its TCP keepalive probes it too): past it poll returns an error. */
FX_INTERNAL int fx_etcd_campaign_start(fx_etcd_t *e, const char *name, int64_t lease, const char *value,
                                       uint32_t timeout_ms);
FX_INTERNAL int fx_etcd_campaign_poll(fx_etcd_t *e, uint32_t wait_ms, int64_t *rev, char *err, size_t errcap);
FX_INTERNAL void fx_etcd_campaign_cancel(fx_etcd_t *e);
FX_INTERNAL void fx_etcd_wakeup(fx_etcd_t *e);

/* base64 (RFC 4648, padded): the encoded length written (NUL-terminated), 0 if cap is short;
 * decode: bytes written, -1 on bad input or a short buffer. */
FX_INTERNAL size_t fx_b64_encode(const void *p, size_t n, char *out, size_t cap);
FX_INTERNAL ssize_t fx_b64_decode(const char *s, uint8_t *out, size_t cap);

#endif
