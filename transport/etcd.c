/* etcd.c — etcd's v3 HTTP/JSON gateway through libcurl (see etcd.h): blocking POSTs for
 * leases and the leader lookup, one asynchronous (curl multi) POST for the campaign,
 * which etcd answers only once this candidate leads. */
#include "etcd.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

#define ETCD_BODY_MAX (64u << 10)
#define ETCD_CONNECT_MS 1000L
#define ETCD_KEEPALIVE_S 2L /* TCP keepalive: idle seconds before the first probe, then between probes */

typedef struct etcd_buf {
    char *p;
    size_t len, cap;
    bool too_long; /* the answer passed ETCD_BODY_MAX (aborted) */
} etcd_buf_t;

struct fx_etcd {
    char eps[FX_ETCD_ENDPOINTS_MAX][96];
    int n_eps, cur;
    CURL *easy; /* the blocking calls */
    struct curl_slist *hdrs;
    CURLM *multi; /* the campaign */
    CURL *camp;
    char *camp_body;
    int camp_ep;
    etcd_buf_t buf, camp_buf;
};

static pthread_once_t etcd_once = PTHREAD_ONCE_INIT;
static void etcd_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t etcd_on_data(char *p, size_t sz, size_t n, void *arg)
{
    etcd_buf_t *b = arg;
    size_t len = sz * n;
    if (b->len + len + 1 > ETCD_BODY_MAX) { /* an answer this large is none we ask for: abort */
        b->too_long = true;
        return 0;
    }
    if (b->len + len + 1 > b->cap) {
        size_t nc = FX_MAX(b->cap * 2, b->len + len + 1);
        char *np = fx_realloc(b->p, nc);
        if (!np) return 0;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, p, len);
    b->len += len;
    b->p[b->len] = 0;
    return len;
}

FX_INTERNAL int fx_etcd_new(const char *endpoints, fx_etcd_t **e_p)
{
    pthread_once(&etcd_once, etcd_global_init);
    fx_etcd_t *e = fx_calloc(1, sizeof *e);
    if (!e) return FLUXON_ERR_NOMEM;
    for (const char *s = endpoints; s && *s && e->n_eps < FX_ETCD_ENDPOINTS_MAX;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        if (n && n < sizeof e->eps[0]) {
            memcpy(e->eps[e->n_eps], s, n);
            e->eps[e->n_eps++][n] = 0;
        }
        s = comma ? comma + 1 : s + n;
    }
    e->easy = curl_easy_init();
    e->multi = curl_multi_init();
    e->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (!e->n_eps || !e->easy || !e->multi || !e->hdrs) {
        int rc = e->n_eps ? FLUXON_ERR_NOMEM : FLUXON_ERR_INVALID_ARGUMENT;
        fx_etcd_free(e);
        return rc;
    }
    *e_p = e;
    return FLUXON_OK;
}

FX_INTERNAL void fx_etcd_free(fx_etcd_t *e)
{
    if (!e) return;
    fx_etcd_campaign_cancel(e);
    if (e->multi) curl_multi_cleanup(e->multi);
    if (e->easy) curl_easy_cleanup(e->easy);
    curl_slist_free_all(e->hdrs);
    fx_free(e->buf.p);
    fx_free(e->camp_buf.p);
    fx_free(e);
}

FX_INTERNAL const char *fx_etcd_endpoint(const fx_etcd_t *e) { return e->eps[e->cur]; }

static void etcd_setup(fx_etcd_t *e, CURL *h, int ep, const char *path, const char *body, etcd_buf_t *b,
                       long timeout_ms)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", e->eps[ep], path);
    b->len = 0;
    b->too_long = false;
    if (b->p) b->p[0] = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, e->hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, etcd_on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, FX_MIN(ETCD_CONNECT_MS, timeout_ms ? timeout_ms : ETCD_CONNECT_MS));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L); /* H1: a peer gone silent is noticed */
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, ETCD_KEEPALIVE_S);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, ETCD_KEEPALIVE_S);
}

/* The gateway's answer as JSON; an {"error": ...} answer is an error with its message. */
static int etcd_parse(const etcd_buf_t *b, const char *what, cJSON **out, char *err, size_t errcap)
{
    const char *end = NULL;
    cJSON *d = b->p ? cJSON_ParseWithOpts(b->p, &end, 0) : NULL; /* a stream answer ends in a newline */
    if (!d) {
        snprintf(err, errcap, "%s: etcd's answer is not JSON: %.80s", what, b->p ? b->p : "(empty)");
        return FLUXON_ERR_PROTOCOL;
    }
    cJSON *r = cJSON_GetObjectItem(d, "result"); /* streaming calls (keepalive) wrap the answer */
    cJSON *eobj = cJSON_GetObjectItem(r ? r : d, "error");
    if (eobj) {
        cJSON *m = cJSON_GetObjectItem(r ? r : d, "message");
        const char *msg = cJSON_IsString(m) ? m->valuestring : cJSON_IsString(eobj) ? eobj->valuestring : "?";
        snprintf(err, errcap, "%s: etcd: %s", what, msg);
        int rc = strstr(msg, "no leader") || strstr(msg, "not found") ? FLUXON_ERR_NOT_FOUND : FLUXON_ERR_UNAVAILABLE;
        cJSON_Delete(d);
        return rc;
    }
    *out = d;
    return FLUXON_OK;
}

/* POSTs body to path on the endpoints in turn (the current one first). */
static int etcd_post(fx_etcd_t *e, const char *path, const char *body, uint32_t timeout_ms, cJSON **out, char *err,
                     size_t errcap)
{
    char dummy[8];
    if (!err) err = dummy, errcap = sizeof dummy;
    size_t at = 0; /* every endpoint's failure is named, not only the last one tried */
    err[0] = 0;
    for (int t = 0; t < e->n_eps; t++) {
        int ep = (e->cur + t) % e->n_eps;
        etcd_setup(e, e->easy, ep, path, body, &e->buf, (long)timeout_ms);
        CURLcode rc = curl_easy_perform(e->easy);
        if (rc == CURLE_OK) {
            e->cur = ep;
            return etcd_parse(&e->buf, path, out, err, errcap);
        }
        if (rc == CURLE_WRITE_ERROR && e->buf.too_long) { /* the data, not the endpoint: no other one */
            e->cur = ep;
            snprintf(err, errcap, "%s: etcd %s: the answer is longer than %u bytes", path, e->eps[ep], ETCD_BODY_MAX);
            return FLUXON_ERR_PROTOCOL;
        }
        int w = at < errcap ? snprintf(err + at, errcap - at, "%s%s: etcd %s: %s", t ? "; " : "", path, e->eps[ep],
                                       curl_easy_strerror(rc))
                            : 0;
        at += w > 0 ? (size_t)w : 0;
    }
    return FLUXON_ERR_UNAVAILABLE;
}

/* An int64 member that the gateway writes as a string (or a number); 0 when absent. */
static int64_t etcd_i64(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItem(o, name);
    if (cJSON_IsString(v)) return strtoll(v->valuestring, NULL, 10);
    if (cJSON_IsNumber(v)) return (int64_t)v->valuedouble;
    return 0;
}

FX_INTERNAL int fx_etcd_lease_grant(fx_etcd_t *e, uint32_t ttl_s, uint32_t timeout_ms, int64_t *id,
                                    uint32_t *granted_s, char *err, size_t errcap)
{
    char body[64];
    snprintf(body, sizeof body, "{\"TTL\":%u}", ttl_s);
    cJSON *d = NULL;
    int rc = etcd_post(e, "/v3/lease/grant", body, timeout_ms, &d, err, errcap);
    if (rc != FLUXON_OK) return rc;
    *id = etcd_i64(d, "ID");
    *granted_s = (uint32_t)etcd_i64(d, "TTL");
    cJSON_Delete(d);
    if (!*id || !*granted_s) {
        if (err) snprintf(err, errcap, "/v3/lease/grant: etcd answered no lease ID or TTL");
        return FLUXON_ERR_PROTOCOL;
    }
    return FLUXON_OK;
}

FX_INTERNAL int fx_etcd_lease_keepalive(fx_etcd_t *e, int64_t id, uint32_t timeout_ms, uint32_t *ttl_s, char *err,
                                        size_t errcap)
{
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)id);
    cJSON *d = NULL;
    int rc = etcd_post(e, "/v3/lease/keepalive", body, timeout_ms, &d, err, errcap);
    if (rc != FLUXON_OK) return rc;
    int64_t ttl = etcd_i64(cJSON_GetObjectItem(d, "result"), "TTL");
    cJSON_Delete(d);
    *ttl_s = ttl > 0 ? (uint32_t)ttl : 0;
    if (ttl <= 0) { /* etcd answers a lease it does not know with no TTL */
        if (err) snprintf(err, errcap, "lease %llx is gone (expired or revoked)", (unsigned long long)id);
        return FLUXON_ERR_NOT_FOUND;
    }
    return FLUXON_OK;
}

FX_INTERNAL int fx_etcd_lease_revoke(fx_etcd_t *e, int64_t id, uint32_t timeout_ms)
{
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)id);
    cJSON *d = NULL;
    int rc = etcd_post(e, "/v3/lease/revoke", body, timeout_ms, &d, NULL, 0);
    cJSON_Delete(d);
    return rc;
}

/* {"name":"<b64 name>"...}: the common head of the election calls. */
static bool etcd_name_json(const char *name, char *out, size_t cap)
{
    char b64[256];
    if (!fx_b64_encode(name, strlen(name), b64, sizeof b64)) return false;
    return (size_t)snprintf(out, cap, "{\"name\":\"%s\"", b64) < cap;
}

FX_INTERNAL int fx_etcd_leader(fx_etcd_t *e, const char *name, uint32_t timeout_ms, char *value, size_t cap,
                               int64_t *rev, char *err, size_t errcap)
{
    char body[512];
    if (!etcd_name_json(name, body, sizeof body - 1)) return FLUXON_ERR_INVALID_ARGUMENT;
    strcat(body, "}");
    cJSON *d = NULL;
    int rc = etcd_post(e, "/v3/election/leader", body, timeout_ms, &d, err, errcap);
    if (rc != FLUXON_OK) return rc;
    cJSON *kv = cJSON_GetObjectItem(d, "kv");
    cJSON *v = cJSON_GetObjectItem(kv, "value");
    ssize_t n = cJSON_IsString(v) ? fx_b64_decode(v->valuestring, (uint8_t *)value, cap - 1) : -1;
    *rev = etcd_i64(kv, "create_revision");
    cJSON_Delete(d);
    if (n < 0) {
        if (err) snprintf(err, errcap, "/v3/election/leader: the leader's value is missing or not base64");
        return FLUXON_ERR_PROTOCOL;
    }
    value[n] = 0;
    return FLUXON_OK;
}

FX_INTERNAL int fx_etcd_get(fx_etcd_t *e, const char *key, uint32_t timeout_ms, char *value, size_t cap, char *err,
                            size_t errcap)
{
    char kb[400], body[480];
    if (!fx_b64_encode(key, strlen(key), kb, sizeof kb)) return FLUXON_ERR_INVALID_ARGUMENT;
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", kb);
    cJSON *d = NULL;
    int rc = etcd_post(e, "/v3/kv/range", body, timeout_ms, &d, err, errcap);
    if (rc != FLUXON_OK) return rc;
    cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "kvs"), 0);
    cJSON *v = cJSON_GetObjectItem(kv, "value");
    ssize_t n = !kv ? -2 : cJSON_IsString(v) ? fx_b64_decode(v->valuestring, (uint8_t *)value, cap - 1) : 0;
    cJSON_Delete(d);
    if (n == -2) return FLUXON_ERR_NOT_FOUND;
    if (n < 0) {
        if (err) snprintf(err, errcap, "/v3/kv/range %s: the value is not base64 or longer than %zu bytes", key, cap - 1);
        return FLUXON_ERR_PROTOCOL;
    }
    value[n] = 0;
    return FLUXON_OK;
}

FX_INTERNAL int fx_etcd_put(fx_etcd_t *e, const char *key, const char *value, uint32_t timeout_ms, char *err,
                            size_t errcap)
{
    size_t vl = strlen(value), vcap = (vl + 2) / 3 * 4 + 1;
    if (vl > FX_ETCD_PUT_MAX) return FLUXON_ERR_INVALID_ARGUMENT;
    char kb[400], *vb = fx_malloc(vcap), *body = fx_malloc(vcap + 440);
    int rc = FLUXON_ERR_NOMEM;
    if (vb && body) {
        rc = FLUXON_ERR_INVALID_ARGUMENT;
        if (fx_b64_encode(key, strlen(key), kb, sizeof kb) && fx_b64_encode(value, vl, vb, vcap)) {
            snprintf(body, vcap + 440, "{\"key\":\"%s\",\"value\":\"%s\"}", kb, vb);
            cJSON *d = NULL;
            rc = etcd_post(e, "/v3/kv/put", body, timeout_ms, &d, err, errcap);
            cJSON_Delete(d);
        }
    }
    fx_free(vb);
    fx_free(body);
    return rc;
}

FX_INTERNAL int fx_etcd_leader_lease(fx_etcd_t *e, const char *name, uint32_t timeout_ms, int64_t *lease,
                                     int64_t *rev, char *err, size_t errcap)
{
    char body[512];
    if (!etcd_name_json(name, body, sizeof body - 1)) return FLUXON_ERR_INVALID_ARGUMENT;
    strcat(body, "}");
    cJSON *d = NULL;
    int rc = etcd_post(e, "/v3/election/leader", body, timeout_ms, &d, err, errcap);
    if (rc != FLUXON_OK) return rc;
    cJSON *kv = cJSON_GetObjectItem(d, "kv");
    *lease = etcd_i64(kv, "lease");
    *rev = etcd_i64(kv, "create_revision");
    cJSON_Delete(d);
    if (!*lease) {
        if (err) snprintf(err, errcap, "/v3/election/leader: the leader key names no lease");
        return FLUXON_ERR_PROTOCOL;
    }
    return FLUXON_OK;
}

FX_INTERNAL int fx_etcd_campaign_start(fx_etcd_t *e, const char *name, int64_t lease, const char *value,
                                       uint32_t timeout_ms)
{
    fx_etcd_campaign_cancel(e);
    char head[300], vb[2 * FX_ETCD_VALUE_MAX];
    if (!etcd_name_json(name, head, sizeof head) || !fx_b64_encode(value, strlen(value), vb, sizeof vb))
        return FLUXON_ERR_INVALID_ARGUMENT;
    size_t cap = strlen(head) + strlen(vb) + 64;
    e->camp_body = fx_malloc(cap);
    e->camp = curl_easy_init();
    if (!e->camp_body || !e->camp) {
        fx_etcd_campaign_cancel(e);
        return FLUXON_ERR_NOMEM;
    }
    snprintf(e->camp_body, cap, "%s,\"lease\":\"%lld\",\"value\":\"%s\"}", head, (long long)lease, vb);
    e->camp_ep = e->cur;
    etcd_setup(e, e->camp, e->camp_ep, "/v3/election/campaign", e->camp_body, &e->camp_buf, (long)timeout_ms);
    if (curl_multi_add_handle(e->multi, e->camp) != CURLM_OK) {
        fx_etcd_campaign_cancel(e);
        return FLUXON_ERR_INTERNAL;
    }
    return FLUXON_OK;
}

FX_INTERNAL void fx_etcd_campaign_cancel(fx_etcd_t *e)
{
    if (e->camp) {
        curl_multi_remove_handle(e->multi, e->camp);
        curl_easy_cleanup(e->camp); /* closes the connection: etcd withdraws the candidacy */
        e->camp = NULL;
    }
    fx_free(e->camp_body);
    e->camp_body = NULL;
}

FX_INTERNAL int fx_etcd_campaign_poll(fx_etcd_t *e, uint32_t wait_ms, int64_t *rev, char *err, size_t errcap)
{
    int running = 0;
    curl_multi_perform(e->multi, &running);
    if (running || !e->camp) {
        curl_multi_poll(e->multi, NULL, 0, (int)wait_ms, NULL); /* also the caller's interruptible sleep */
        curl_multi_perform(e->multi, &running);
    }
    if (!e->camp) return FLUXON_ERR_INVALID_ARGUMENT;
    if (running) return FX_ETCD_WAITING;
    CURLcode res = CURLE_OK;
    int q = 0;
    for (CURLMsg *m; (m = curl_multi_info_read(e->multi, &q));)
        if (m->msg == CURLMSG_DONE && m->easy_handle == e->camp) res = m->data.result;
    int ep = e->camp_ep;
    fx_etcd_campaign_cancel(e);
    if (res != CURLE_OK) {
        snprintf(err, errcap, "campaign: etcd %s: %s", e->eps[ep], curl_easy_strerror(res));
        e->cur = (ep + 1) % e->n_eps; /* the next attempt tries the next endpoint */
        return FLUXON_ERR_UNAVAILABLE;
    }
    cJSON *d = NULL;
    int rc = etcd_parse(&e->camp_buf, "campaign", &d, err, errcap);
    if (rc != FLUXON_OK) return rc;
    *rev = etcd_i64(cJSON_GetObjectItem(d, "leader"), "rev");
    cJSON_Delete(d);
    if (!*rev) {
        snprintf(err, errcap, "campaign: etcd answered no leader key");
        return FLUXON_ERR_PROTOCOL;
    }
    return FLUXON_OK;
}

FX_INTERNAL void fx_etcd_wakeup(fx_etcd_t *e) { curl_multi_wakeup(e->multi); }

static const char etcd_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

FX_INTERNAL size_t fx_b64_encode(const void *p, size_t n, char *out, size_t cap)
{
    const uint8_t *s = p;
    size_t need = (n + 2) / 3 * 4;
    if (need + 1 > cap) return 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        out[o++] = etcd_b64[v >> 18 & 63];
        out[o++] = etcd_b64[v >> 12 & 63];
        out[o++] = i + 1 < n ? etcd_b64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? etcd_b64[v & 63] : '=';
    }
    out[o] = 0;
    return o;
}

FX_INTERNAL ssize_t fx_b64_decode(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s), o = 0;
    if (n % 4) return -1;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char ch = s[i + k];
            const char *at = ch ? strchr(etcd_b64, ch) : NULL;
            if (ch == '=' && i + 4 == n && k >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!at || pad) return -1;
            v = v << 6 | (uint32_t)(at - etcd_b64);
        }
        for (int k = 0; k < 3 - pad; k++) {
            if (o >= cap) return -1;
            out[o++] = (uint8_t)(v >> (16 - 8 * k));
        }
    }
    return (ssize_t)o;
}

#undef ETCD_BODY_MAX
#undef ETCD_CONNECT_MS
#undef ETCD_KEEPALIVE_S
