/* config.h — per-role configuration loaded from one JSON document (cJSON), validated on
 * load. Unknown fields are errors; sizes accept integers (bytes) or strings with units
 * ("512MiB", "1GiB", "4096"); every error message names the field, the value and the
 * rule, e.g. `reserve.grant_bytes: 100 is not a multiple of 4096`. */
#ifndef FX_CONFIG_H
#define FX_CONFIG_H

#include "fx.h"

typedef enum fx_role {
    FX_ROLE_NONE = 0,
    FX_ROLE_MASTER = 1,
    FX_ROLE_OWNER = 2,
    FX_ROLE_EXTERNAL = 3
} fx_role_t;

typedef enum fx_node_role {
    FX_NODE_GPU_OWNER = 0,    /* "gpu_owner": a host running inference engines */
    FX_NODE_REMOTE_CACHE = 1  /* "remote_cache": a CPU-only memory contributor */
} fx_node_role_t;

enum { FX_EVICT_LRU = 0, FX_EVICT_S3FIFO = 1, FX_EVICT_SLRU = 2 }; /* owner "eviction_policy" (issue 15) */
enum { FX_WB_ADMIT_ALL = 0, FX_WB_ADMIT_SECOND_TOUCH = 1 }; /* owner "writeback_admission" (issue 38) */

#define FX_ID_MAX 64          /* cluster_id / node_id: at most 63 bytes + NUL */
#define FX_TOKEN_MAX 256      /* cluster_token: at most 255 bytes + NUL */
#define FX_HOST_MAX 64
#define FX_PATH_MAX 108       /* sizeof(sockaddr_un.sun_path) */
/* tenants (issue 42): a name is 1..FX_TENANT_NAME_MAX-1 bytes of [A-Za-z0-9_.-]; an owner
 * knows at most FX_TENANTS_MAX of them ("default" included) */
#define FX_TENANT_NAME_MAX 33
#define FX_TENANTS_MAX 32
#define FX_TENANT_DEFAULT "default"

typedef struct fx_tenant_cfg {
    char name[FX_TENANT_NAME_MAX];
    char token[FX_TOKEN_MAX]; /* "" only for "default" (no token asked) */
    uint64_t pinned_bytes_max; /* "pinned_bytes_max": its pins' budget in bytes (capped by the owner's
                                * pin_budget_ratio x the hot tier); used when has_pinned_max */
    bool has_pinned_max;
    /* quotas (issue 42, owner/evict_quota.c): the most slot bytes of this owner's hot tier the
     * tenant may hold, and the share other tenants' puts never evict (0: none) */
    uint64_t quota_bytes, guaranteed_bytes;
    /* the most bytes of its records this owner's disk tier keeps (0: none): past it, its
     * oldest records leave the disk for its newer ones (owner/disk.c) */
    uint64_t disk_quota_bytes;
} fx_tenant_cfg_t;

/* A tenants' quota table (issue 42): the master's "tenants" config field, the value of its
 * etcd key <ha.key>.tenants, and the master's run-time table (master/tenants.c), which it
 * pushes to every owner. At most FX_TENANT_TABLE_MAX entries. */
#define FX_TENANT_TABLE_MAX (FX_TENANTS_MAX + 1)
#define FX_TQ_QUOTA 1u      /* quota given (the value of TENANT_PUSH's FX_TENANT_SET_QUOTA) */
#define FX_TQ_GUARANTEED 2u /* guaranteed given (FX_TENANT_SET_GUARANTEED) */
typedef struct fx_tenant_quota {
    char name[FX_TENANT_NAME_MAX];
    uint64_t quota, guaranteed; /* bytes of each owner's hot tier; 0: none */
    uint32_t fields;            /* FX_TQ_*: which of the two were given (the others stay each owner's) */
} fx_tenant_quota_t;

/* reply faults act on the master's replies; delay_request holds an owner's request back */
/* "huge_pages" of an owner: its segment on MFD_HUGETLB pages — never, when available
 * (else 4 KiB pages, the reason logged), or required (else the owner does not start). */
enum { FX_HUGE_OFF = 0, FX_HUGE_TRY = 1, FX_HUGE_ON = 2 };
/* "segment_touch" of an owner or external: after its segment prefault maps the pages, read
 * every page once where a probe finds a mapped page's first access costly (auto), never,
 * or always (transport/prefault.h). */
enum { FX_TOUCH_AUTO = 0, FX_TOUCH_OFF = 1, FX_TOUCH_ON = 2 };
enum { FX_PEER_SEG_MAP = 0, FX_PEER_SEG_UCX = 1 }; /* "peer_segments" (issue 38) */
enum { FX_TARGET_COPY_KEEP = 0, FX_TARGET_COPY_DROP = 1 }; /* "target_copy_after_fetch" (issue 38) */
#define FX_RANGE_QUARANTINE_AUTO UINT32_MAX /* range_quarantine_ms not set: computed */
/* beyond an owner's push deadline (3/4 inflight_ttl_ms after its PUT_PLACE / APPEND_START,
 * owner/place.c, owner/replica.c): the UCX orphan grace (1 s, transport/ucx_dp.c) and margin */
#define FX_RANGE_QUARANTINE_GRACE_MS 2000u
enum { FX_FAULT_NONE = 0, FX_FAULT_DELAY = 1, FX_FAULT_DROP = 2, FX_FAULT_DUPLICATE = 3, FX_FAULT_DELAY_REQUEST = 4,
       FX_FAULT_TRUNCATE = 5 };

typedef struct fx_config {
    fx_role_t role;
    char cluster_id[FX_ID_MAX];           /* required, [A-Za-z0-9._-]+ */
    char cluster_token[FX_TOKEN_MAX];     /* "" = none */
    int log_level;                        /* fx_log_level_t ["info"] */
    bool log_level_given;                 /* the config names log_level (fx_log_apply_config_level) */
    char node_id[FX_ID_MAX];              /* owner [hostname]; external [hostname:pid] */
    uint32_t start_timeout_ms;            /* embedded start wait [10000] */
    uint64_t max_frame_bytes;             /* ["64MiB"], >= 4096 */

    /* master */
    char listen_host[FX_HOST_MAX];        /* "listen" ["127.0.0.1:7600"], IPv4 host:port */
    uint16_t listen_port;                 /* 0 allowed (ephemeral) */
    char metrics_listen[FX_HOST_MAX + 8]; /* "" = off */
    uint32_t inflight_ttl_ms;             /* [60000], > 0 */
    uint32_t heartbeat_timeout_ms;        /* [3000], > 0: owner dead after this silence */
    uint32_t dead_owner_grace_ms;         /* [600000], > 0: a dead owner is forgotten after this (L1) */
    int target_copy_after_fetch;          /* "target_copy_after_fetch" of a master ["keep"]: when an owner
                                           * fetches a value back from a replica target (a CPU owner) as
                                           * its own replica, FX_TARGET_COPY_KEEP keeps the target's copy
                                           * (its next write-back finds it: no copy, "already");
                                           * FX_TARGET_COPY_DROP drops it (exclusive levels) (issue 38) */
    uint32_t idle_poll_us;                /* master and external (issue 38): after a message, the
                                           * reactor looks for the next one this long (yielding the
                                           * CPU between looks) before it sleeps [master
                                           * FX_MASTER_POLL_DEFAULT_US, env FLUXON_MASTER_POLL_US;
                                           * external FX_CLIENT_POLL_DEFAULT_US, env
                                           * FLUXON_CLIENT_POLL_US], 0..CFG_RING_POLL_MAX, 0 = off */
    uint32_t range_reuse_delay_ms;        /* [4], 0..1000, 0 = off (issue 38): a range the master
                                           * frees is reused only this long after; a copy of it that
                                           * ended 1 ms before it from its LOOKUP is read before
                                           * GET_DONE's answer */
    uint32_t range_quarantine_ms;         /* [FX_RANGE_QUARANTINE_AUTO: 3/4 inflight_ttl_ms +
                                           * FX_RANGE_QUARANTINE_GRACE_MS], 0 = off (W2): after this
                                           * master first learns an owner that had another master,
                                           * no placed or appended range goes to its segment for so
                                           * long (pushes the old master started may still land) */
    uint32_t replica_target_roles;        /* "replica_target_roles" [["remote_cache"]]: bit
                                           * (1 << fx_node_role_t) per node role that may receive
                                           * replica tasks and write-backs (issue 16) */

    /* owner */
    char master_host[FX_HOST_MAX];        /* "master" ["127.0.0.1:7600"] */
    uint16_t master_port;                 /* must be > 0 */
    char master_socket[FX_PATH_MAX];      /* "master": "unix:PATH": the master's unix socket on
                                           * this host (its "socket"), used instead of TCP [""] */
    char socket_path[FX_PATH_MAX];        /* owner: where it listens; external: owner's; master:
                                           * a unix socket it also listens on for owners on its
                                           * host [""] = none */
    uint64_t segment_bytes;               /* ["1GiB"], multiple of 4096 */
    fx_node_role_t node_role;             /* ["gpu_owner"] */
    char sub_cluster[FX_ID_MAX];          /* placement group for preferred_sub_cluster [""] */
    char ucx_tls[128];                    /* owner "ucx_tls" [""]: the data plane's UCX transports
                                           * (UCX_TLS syntax); "": UCX's choice, with peer failure
                                           * handling (tcp between the processes of one host) */
    int numa_node;                        /* [-1] = no placement; >= -1 */
    uint64_t grant_bytes;                 /* "reserve.grant_bytes" ["512MiB"], x4096 */
    bool has_expected;                    /* "reserve.expected" present */
    bool has_grant_bytes;                 /* "reserve.grant_bytes" present */
    uint64_t expected_value_len;          /* "reserve.expected.value_len" > 0 */
    uint64_t expected_payload_bytes;      /* "reserve.expected.payload_capacity_bytes" */
    double hot_capacity_ratio;            /* [0.95], in (0, 1] */
    double pin_budget_ratio;              /* [0.5], in [0, 1]: pinned bytes of all tenants together at
                                           * most this share of the hot tier (issue 42) */
    uint64_t hot_capacity_bytes;          /* hot tier watermark in bytes; 0 = the ratio [0] */
    uint32_t handle_ttl_ms;               /* [30000], > 0 */
    uint32_t put_plan_ttl_ms;             /* [20000], > 0: a prepared put plan not committed by then is released */
    uint32_t heartbeat_interval_ms;       /* [1000], > 0 */
    uint32_t claim_timeout_ms;            /* slot claim hard timeout [30000], > 0 */
    uint32_t idle_grant_return_ms;        /* "reserve.idle_grant_return_ms" [2000]: an idle grant
                                           * goes back to the master after this (issue 15) */
    int eviction_policy;                  /* "eviction_policy" ["s3fifo"; "lru" when writeback_watermark
                                           * is set]: FX_EVICT_* (lru, s3fifo, slru) */
    bool eviction_policy_set;             /* the config named it */
    double writeback_watermark;           /* [0] = off; in (0, 1): values colder than this share
                                           * of the hot tier are written back to a replica
                                           * target, and eviction takes copied groups
                                           * (single-copy demotion) before others (issue 16) */
    int writeback_admission;              /* "writeback_admission" ["second_touch"]: which cold
                                           * values get a copy: all, or those whose key was seen
                                           * twice (a hit, or a put after an eviction) (issue 38) */
    uint32_t writeback_max_stall_ms;      /* "writeback_max_stall_ms" [0]: how long a claim may wait
                                           * for the copy of a value it would evict; 0: never (the
                                           * value goes without its copy: a later miss, not a stall) */
    int peer_segments;                    /* "peer_segments" of an owner ["map"]: FX_PEER_SEG_MAP maps the
                                           * segment of a peer owner on the same host (same boot id and
                                           * PID namespace) and copies with memcpy; FX_PEER_SEG_UCX always
                                           * UCX (issue 38, owner/peer_map.c) */
    bool prefetch_from_owners;            /* "prefetch_from_owners" [false]: a PREFETCH also looks up
                                           * (one LOOKUP) the keys neither in memory nor on disk here
                                           * and copies those other owners hold (issue 38) */
    uint32_t master_timeout_ms;           /* owner -> master request timeout [5000], > 0 */
    /* "client_limits" (owner, issue 44 C3): what ONE external client may hold at once */
    uint64_t client_max_pinned_bytes;     /* ".max_pinned_bytes": slot bytes its pins (get handles and
                                           * read plans) hold [0 = three quarters of the hot tier] */
    uint32_t client_max_handles;          /* ".max_handles": get handles not yet consumed [4096] */
    uint32_t client_max_plans;            /* ".max_plans": put plans not yet committed [1024] */
    uint32_t client_pin_expire_ms;        /* ".pin_expire_ms": a client whose oldest pin is older is
                                           * disconnected, every plan, handle and pin revoked [600000] */
    /* "disk" (owner, issue 39): the disk tier, off unless disk.path is set */
    char disk_path[FX_PATH_MAX];          /* ".path": the directory (one owner per directory) */
    uint64_t disk_capacity_bytes;         /* ".capacity_bytes": bytes of segment files at most (required) */
    uint64_t disk_segment_bytes;          /* ".segment_bytes" [256 MiB]: one segment file */
    int disk_direct_io;                   /* ".direct_io" ["auto"]: FX_DISK_DIRECT_* order: auto, on, off */
    int disk_admission;                   /* ".admission" ["all"]: FX_WB_ADMIT_* (all, second_touch) */
    /* "test": fault injection for tests (owner only, off by default) */
    char fault_message[32];               /* "test.fault_message": master reply type, "" = off */
    int fault_kind;                       /* "test.fault": FX_FAULT_DELAY/_DROP/_DUPLICATE */
    uint32_t fault_ms;                    /* "test.fault_ms": delay [0] */
    uint32_t fault_count;                 /* "test.fault_count": how many replies [1], 0 = all */
    uint32_t fail_transfers;              /* "test.fail_transfers": UCX fetches to fail [0] */
    uint32_t test_late_gets;              /* "test.late_gets": UCX GETs reported timed out at once and
                                           * posted test.late_ms later (their bytes land late) [0] */
    uint32_t test_late_ms;                /* "test.late_ms" [0] */
    uint32_t test_late_puts;              /* "test.late_puts": the same for UCX PUTs (pushes) [0] */
    uint32_t test_peer_forget_ms;         /* "test.peer_forget_ms": an owner no longer announced is
                                           * named to the next master this long [0: 600000] */
    char test_value_oracle[32];           /* "test.value_oracle": a key prefix: every value of a key with it
                                           * is the demo's value of that key; checked where it enters or
                                           * leaves this owner (owner/oracle.c) ["": off] */
    /* "test" message chaos (issue 17; master and owners, off by default): per control frame
     * received, drop / delay (uniform in 1..delay_ms) / duplicate it with these probabilities
     * in parts per million; a frame of a kind the protocol cannot survive losing is never
     * touched (transport/chaos.c). seed: the fault stream's seed [0: from node_id] */
    uint32_t chaos_drop_ppm, chaos_delay_ppm, chaos_delay_ms, chaos_dup_ppm;
    uint64_t chaos_seed;
    int64_t test_clock_offset_ms;         /* "test.clock_offset_ms" (master): its put-id clock runs this
                                           * far off CLOCK_REALTIME (a standby on a skewed host) [0] */
    int huge_pages;                       /* FX_HUGE_OFF/TRY/ON: segment on hugetlb pages ["off"] */

    /* "ha" (master and owner, issue 17): masters elect a leader through etcd; owners find
     * it there. Off when ha_etcd is "". */
    char ha_etcd[512];                    /* "ha.etcd": "http://host:port[,...]" (1..8 endpoints) */
    uint32_t ha_lease_ttl_ms;             /* "ha.lease_ttl_ms" [5000], 1000..600000, whole seconds */
    char ha_key[128];                     /* "ha.key": the election's name ["fluxon/<cluster_id>/master"] */

    /* owner, issue 18 */
    uint32_t ring_poll_us;                /* after a ring request or reply, poll the rings this long
                                             before sleeping on their doorbells
                                             [FX_RING_POLL_DEFAULT_US; env FLUXON_RING_POLL_US],
                                             0..CFG_RING_POLL_MAX */
    uint32_t ring_poll_plan_us;           /* while a ring client holds a put plan (put_start answered,
                                             commit or abort not read yet) the window is at least
                                             this long [FX_RING_POLL_PLAN_DEFAULT_US on hosts with >=
                                             FX_RING_POLL_MIN_CPUS CPUs or when ring_poll_us is set
                                             (field or env), else 0], 0..CFG_RING_POLL_MAX; no
                                             effect when ring_poll_us is 0 */

    /* owner, issue 42: "tenants" {"NAME": {"token": "..."}}; "default" is always known,
     * with no token unless it is listed with one */
    fx_tenant_cfg_t tenants[FX_TENANTS_MAX];
    uint32_t n_tenants;                   /* entries of tenants[] (configured; "default" only if listed) */

    /* master, issue 42: "tenants" {"NAME": {"quota_bytes": SIZE, "guaranteed_bytes": SIZE}}: the
     * quota table the master starts with and hands to every owner (etcd's, with HA, wins) */
    fx_tenant_quota_t tenant_quotas[FX_TENANT_TABLE_MAX];
    uint32_t n_tenant_quotas;

    /* external */
    char tenant[FX_TENANT_NAME_MAX];      /* "tenant" ["default"] (issue 42) */
    char tenant_token[FX_TOKEN_MAX];      /* "tenant_token" [""]: the tenant's secret */
    char tenant_admin_token[FX_TOKEN_MAX]; /* owner "tenant_admin_token" [""]: a `tenant set` carrying it may
                                            * change any tenant's quota ("": only a tenant's own clients) */
    uint32_t timeout_ms;                  /* per-request timeout [30000], > 0 */
    bool prefault_segment;                /* map the segment's page tables at open [true] */
    int segment_touch;                    /* FX_TOUCH_AUTO/OFF/ON, owner and external ["auto"] */
    uint32_t heap_reserve_mib;            /* master and owner: MiB handed to the heap once per
                                             process, before the node's thread starts, and faulted
                                             in on a thread (common/heap.c), rounded up to 64 MiB;
                                             0 = none [master 0; owner segment_bytes / 8 in whole
                                             64 MiB, at most 1024], 0..65536 */
    bool transport_socket;                /* "transport": "socket" (else "ring") [ring; env
                                             FLUXON_CLIENT_TRANSPORT=socket picks socket] */
} fx_config_t;

#define FX_RING_POLL_DEFAULT_US 50
#define FX_MASTER_POLL_DEFAULT_US 100
#define FX_CLIENT_POLL_DEFAULT_US 100
#define FX_RING_POLL_MIN_CPUS 8
#define FX_RING_POLL_PLAN_DEFAULT_US 2000
#define CFG_RING_POLL_MAX 1000000
/* "heap_reserve_mib" (master and owner): MiB of heap faulted in ahead of the cache's
 * growth (common/heap.c); the owner's default: segment_bytes / 8 + disk.capacity_bytes / 32
 * (its disk index) in whole 64 MiB (none when that sum is under 64 MiB), at most
 * FX_HEAP_RESERVE_OWNER_MAX_MIB;
 * the master's: none */
#define FX_HEAP_RESERVE_OWNER_MAX_MIB 1024
#define CFG_HEAP_RESERVE_MAX_MIB 65536

/* Resets *cfg to role's defaults (config_defaults.c): what fx_config_parse starts from. */
FX_INTERNAL void fx_config_defaults(fx_config_t *cfg, fx_role_t role);

/* Parses and validates json (NUL-terminated) into *cfg (defaults applied first).
 * On error returns FLUXON_ERR_CONFIG and writes a one-line message into err (errcap
 * bytes, always NUL-terminated when errcap > 0) naming the field, value and rule.
 * Never crashes on any input. */
FX_INTERNAL int fx_config_parse(const char *json, fx_config_t *cfg, char *err, size_t errcap);

/* Reads the file at path and parses it as fx_config_parse; an unreadable file is
 * FLUXON_ERR_CONFIG with the path and strerror in err. */
FX_INTERNAL int fx_config_load_file(const char *path, fx_config_t *cfg, char *err,
                                    size_t errcap);

/* Parses a size: a non-negative integer of bytes, or a string "<digits>[unit]" where
 * unit is one of B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of
 * 1000), case-sensitive, no space, no fraction. Returns 0 and *out on success, -1 on a
 * bad format, -2 on a well-formed size past 2^64 - 1 bytes (*out untouched on failure). */
FX_INTERNAL int fx_parse_size(const char *s, uint64_t *out);

/* Parses "a.b.c.d:port" (IPv4 dotted quad or "localhost", port 0..65535). Returns 0 on
 * success, -1 otherwise. host receives the host text (hostcap bytes). */
FX_INTERNAL int fx_parse_hostport(const char *s, char *host, size_t hostcap, uint16_t *port);

FX_INTERNAL const char *fx_role_name(fx_role_t role);
/* A tenant name: 1..FX_TENANT_NAME_MAX-1 bytes of [A-Za-z0-9_.-] (config_tenants.c). */
FX_INTERNAL bool fx_tenant_name_ok(const char *s, size_t len);
/* Parses a tenants' quota table (config_tenants.c): obj must be a JSON object
 * {"NAME": {"quota_bytes": SIZE, "guaranteed_bytes": SIZE}, ...}, each field optional, SIZE a
 * whole number of bytes or a size string (fx_parse_size); names as fx_tenant_name_ok, each
 * once, at most cap of them; no other field (a token is an owner's field); a guarantee above
 * a quota other than 0 is refused. The one parser of the master's config field and of the
 * etcd value. Returns 0 with tab[0..*n) set, or -1 with at = where ("acme.quota_bytes",
 * "acme", or "" for the table itself) and why = the value and the rule (tab is then scratch,
 * *n untouched). */
struct cJSON;
FX_INTERNAL int fx_tenant_table_parse(const struct cJSON *obj, fx_tenant_quota_t *tab, uint32_t cap, uint32_t *n,
                                      char *at, size_t atcap, char *why, size_t whycap);
FX_INTERNAL const char *fx_node_role_name(fx_node_role_t r);

#endif
