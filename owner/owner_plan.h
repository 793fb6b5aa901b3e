/* owner_plan.h — a put plan on the owner: the data put.c drives through its states and
 * place.c annotates with the master's placement (owner_placement_t, place.c's alone). */
#ifndef FX_OWNER_PLAN_H
#define FX_OWNER_PLAN_H

#include "owner_store.h"

typedef struct owner_placement {
    char *preferred;          /* preferred_sub_cluster, NULL = none */
    uint64_t put_token;       /* 0: not placed (local-first, no in-flight record at the master) */
    bool target_remote;       /* the values go to the target over UCX before PUT_DONE */
    bool pushing, pushed;
    char target_id[FX_ID_MAX];
    uint64_t target_gen, target_base;
    uint8_t *target_addr, *target_rkey;
    uint32_t target_addr_len, target_rkey_len;
    uint64_t *target_offsets;  /* n entries: where key i goes in the target's segment */
    uint64_t place_sent_ms;    /* when PUT_PLACE left (fx_now_ms) */
    uint64_t push_deadline_ms; /* the push must be over by then: 3/4 of the master's TTL */
    uint64_t link_epoch;       /* place.c's count of lost master connections at PUT_PLACE */
} owner_placement_t;

/* States: CLAIMING (slots being claimed, maybe placed) -> PREPARED (put_start answered,
 * the external writes) -> PUBLISHING (committed: local-visible, [pushed], PUT_DONE until
 * its outcome is known) -> freed. Abort frees it from CLAIMING or PREPARED. */
enum { OP_CLAIMING = 1, OP_PREPARED = 2, OP_PUBLISHING = 3,
       OP_EXPIRED = 4 /* past put_plan_ttl_ms: keys free, slots kept until the client's commit,
                       * abort or disconnect (its engine may still write them: W5) */ };

struct owner_plan;
/* Key i of a plan as the owner's in-flight map holds it (an intrusive map: no entry
 * allocated, no key copied); key and klen are the plan's own. */
typedef struct owner_plan_key {
    char *key;
    uint32_t klen;
    uint32_t i;
    struct owner_plan *p;
} owner_plan_key_t;

typedef struct owner_plan {
    uint64_t id;
    fx_owner_t *o;
    owner_ext_t *ext; /* NULL once committed (the owner publishes it) or orphaned */
    struct owner_plan *prev, *next;
    int state;
    size_t n;
    /* the per-key arrays, the group lengths and the keys' bytes: one allocation (arrays) */
    void *arrays;
    char **keys;              /* n pointers into the key bytes (each key NUL-terminated) */
    uint32_t *klens;
    uint64_t *khash;          /* fx_hmap_hash of each key: hashed once, for every map it is in */
    int *status;
    owner_plan_key_t *ikeys;  /* n: what the in-flight map stores for each key (put.c) */
    fx_slot_ref_t *slots;     /* 2n: per key, then the claim's scratch; once committed, key i's
                               * entry is fx_ostore_find(slots[i]) (identity, never a pointer) */
    uint64_t value_len, flags, lease_id;
    uint32_t pin_ttl_ms;      /* issue 42: pin the values once published (pins.c); 0: none */
    uint64_t q_charged;       /* issue 42 quotas: slot bytes charged to tenant q_tenant at put_start */
    int q_tenant;
    uint64_t *group_lens;
    size_t n_groups;
    uint64_t batch_id;
    uint32_t attempts;
    fx_timer_t retry_timer;   /* PREPARED: the put_plan_ttl_ms expiry; PUBLISHING: the T1 retry */
    uint64_t req_id;          /* put_start / PUT_INLINE request to answer */
    fx_conn_t *reply_conn;
    uint8_t *inline_value;    /* PUT_INLINE: the bytes to stage (freed once copied); */
    bool is_inline;           /* the answer to req_id is the publish outcome */
    uint64_t answer_by_ms;    /* PUT_INLINE: answered by then (fx_now_ms), below the caller's wait (L3) */
    fx_timer_t answer_timer;  /* PUT_INLINE publishing: UNKNOWN_OUTCOME at answer_by_ms */
    owner_placement_t place;  /* place.c */
    uint64_t t0_ns;           /* put_start arrived, then commit arrived (fx_now_ns): latency histograms */
    uint8_t *repl_mask;       /* n entries: key i gets an eager replica task (make_replica_task and
                               * its mask, not write_through); NULL: none (issue 16) */
} owner_plan_t;

#endif
