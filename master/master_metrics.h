/* master_metrics.h — THE master's metric catalog (see owner/owner_metrics.h for the row
 * format). fx_mmetrics_t, the snapshot the reactor publishes, is generated from it; the
 * `fluxon master-stats` JSON and /metrics are both rendered from these rows (stats.c).
 *
 * Adding a KV counter is ONE row in FX_MASTER_KV_COUNTERS: the mkv_t counter field
 * (s->c.<name>), the JSON member and the family all come from it; increment it where it
 * happens. Other numbers: a row in the block of the file that fills it (master.c:
 * FX_MASTER_NODE_METRICS; stats.c: FX_MASTER_KV_GAUGES) and its assignment there. */
#ifndef FX_MASTER_METRICS_H
#define FX_MASTER_METRICS_H

#include "metrics.h"

/* master.c: identity (first in the master-stats document) */
#define FX_MASTER_IDENTITY_METRICS(X)                                                                            \
    X(generation, GAUGE, "master_generation", "", "The master's generation (changes on restart)")                \
    X(owners, GAUGE, "master_owners", "", "Owners the master knows (alive or dead)")

/* master.c: nodes and connections */
#define FX_MASTER_NODE_METRICS(X)                                                                                \
    X(owners_alive, GAUGE, "master_nodes", "state=\"alive\"", "Known owners by liveness")                        \
    X(owners_dead, GAUGE, "master_nodes", "state=\"dead\"", "")                                                 \
    X(registrations, COUNTER, "master_registrations_total", "kind=\"new\"", "REGISTER accepted: new owner, new generation of a known one, reconnect") \
    X(reregistrations, COUNTER, "master_registrations_total", "kind=\"new_generation\"", "")                    \
    X(reconnects, COUNTER, "master_registrations_total", "kind=\"reconnect\"", "")                              \
    X(owners_declared_dead, COUNTER, "master_owners_declared_dead_total", "", "Owners declared dead (missed heartbeats or lost connection)") \
    X(owners_forgotten, COUNTER, "master_owners_forgotten_total", "", "Dead owners forgotten after dead_owner_grace_ms (their replicas and held INVALIDATEs dropped)") \
    X(tenant_pushes, COUNTER, "master_tenant_pushes_total", "", "Quota changes (tenant set) owners pushed, each sent on to every other owner (issue 42)") \
    X(tenant_table_stores, COUNTER, "master_tenant_table_stores_total", "", "Tenants' quota tables stored in etcd (HA)") \
    X(tenant_table_loads, COUNTER, "master_tenant_table_loads_total", "", "Tenants' quota tables read from etcd and applied (at election, or changed there)") \
    X(tenant_table_refused, COUNTER, "master_tenant_table_refused_total", "", "Tenants' quota tables read from etcd and refused (not valid; the log says why)") \
    X(connections, GAUGE, "master_connections", "", "Connections open to the master")                          \
    X(poll_backoffs, COUNTER, "master_poll_backoffs_total", "", "Times the master's poll window (idle_poll_us) closed for a while: a thread that never yields shares its core") \
    X(ha_leader, GAUGE, "master_ha_leader", "", "1 while this master serves (always without \"ha\"; issue 17)")    \
    X(ha_elections, COUNTER, "master_ha_elections_total", "", "Times this master was elected leader through etcd") \
    X(ha_depositions, COUNTER, "master_ha_depositions_total", "", "Times it lost the leadership (lease expired or unsure)") \
    /* the test message chaos (issue 17; 0 unless the "test" section sets it) */                                  \
    X(chaos_dropped, COUNTER, "master_test_chaos_frames_total", "fault=\"dropped\"", "Control frames received that the test message chaos dropped, delayed or duplicated") \
    X(chaos_delayed, COUNTER, "master_test_chaos_frames_total", "fault=\"delayed\"", "")                          \
    X(chaos_duplicated, COUNTER, "master_test_chaos_frames_total", "fault=\"duplicated\"", "")

/* stats.c: gauges of the KV state */
#define FX_MASTER_KV_GAUGES(X)                                                                                   \
    X(routes, GAUGE, "master_routes", "", "Keys with a route")                                                   \
    X(replicas, GAUGE, "master_replicas", "", "Replicas recorded over all routes")                               \
    X(leases, GAUGE, "master_leases", "", "Leases held")                                                        \
    X(put_dedup_acks, GAUGE, "master_put_dedup_acks", "", "PUT_DONE answers kept for deduplication")            \
    X(put_dedup_bytes, GAUGE, "master_put_dedup_bytes", "", "Bytes of PUT_DONE answers kept for deduplication") \
    X(prefix_index_keys, GAUGE, "master_prefix_index_keys", "", "Keys in the prefix index (0: not built; LIST builds it)") \
    X(delete_tombstones_held, GAUGE, "master_delete_tombstones", "", "Deletes and removed routes remembered now: the re-publication window of a new master is open")

/* inflight.c: in-flight records */
#define FX_MASTER_INFLIGHT_METRICS(X)                                                                            \
    X(inflight_puts, GAUGE, "master_inflight", "kind=\"puts\"", "In-flight records at the master")              \
    X(inflight_put_keys, GAUGE, "master_inflight", "kind=\"put_keys\"", "")                                     \
    X(inflight_gets, GAUGE, "master_inflight", "kind=\"gets\"", "")

/* the KV counters (mkv_t's c.<name>, incremented by the KV files) */
#define FX_MASTER_KV_COUNTERS(X)                                                                                 \
    X(put_done_batches, COUNTER, "master_put_done_batches_total", "", "PUT_DONE batches received")               \
    X(put_dedup, COUNTER, "master_put_dedup_total", "", "PUT_DONE batches answered from the dedup record")       \
    X(puts, COUNTER, "master_puts_total", "", "Keys published")                                                 \
    X(put_converged, COUNTER, "master_put_converged_total", "", "Keys whose same-put_id race converged")        \
    X(put_rejected, COUNTER, "master_put_rejected_total", "", "Keys refused at publish")                        \
    X(lookups, COUNTER, "master_lookups_total", "", "Keys looked up")                                           \
    X(lookup_hits, COUNTER, "master_lookup_hits_total", "", "Keys looked up that had a live replica")           \
    X(get_done_replicas, COUNTER, "master_get_done_replicas_total", "", "Replicas added by GET_DONE")           \
    X(get_done_stale, COUNTER, "master_get_done_stale_total", "", "GET_DONE keys refused as stale")             \
    X(get_done_full, COUNTER, "master_get_done_full_total", "",                                                  \
      "GET_DONE copies not kept as replicas: the key had its most replicas already")                             \
    X(get_durable, COUNTER, "master_get_copies_total", "kind=\"durable\"", "Fetch copies by kind")              \
    X(get_temporary, COUNTER, "master_get_copies_total", "kind=\"temporary\"", "")                              \
    X(get_reuse, COUNTER, "master_get_copies_total", "kind=\"reuse\"", "")                                      \
    X(deletes, COUNTER, "master_deletes_total", "", "Keys deleted")                                             \
    X(deletes_unconfirmed_away, COUNTER, "master_deletes_unconfirmed_away_total", "", "DELETEs answered UNKNOWN_OUTCOME because an owner holding a copy was not connected (W6)") \
    X(invalidations_sent, COUNTER, "master_invalidations_sent_total", "", "Replicas invalidated")               \
    X(invalidations_held_after_restart, COUNTER, "master_invalidations_held_after_restart_total", "", "One-way INVALIDATEs of an owner's disk records sent to it within 2 s before it restarted: sent again to the new process (their tombstones may have been lost)") \
    X(invalidations_held_unconfirmed, COUNTER, "master_invalidations_held_unconfirmed_total", "", "Acked INVALIDATEs an owner did not confirm (an error, no answer): held, sent again when it comes back") \
    X(invalidate_msgs, COUNTER, "master_invalidate_messages_total", "", "INVALIDATE messages sent")             \
    X(grants, COUNTER, "master_grants_total", "", "Segment grants handed out")                                  \
    X(leases_granted, COUNTER, "master_leases_granted_total", "", "Leases granted")                             \
    X(leases_expired, COUNTER, "master_leases_expired_total", "", "Leases expired")                             \
    X(lease_routes_expired, COUNTER, "master_lease_routes_expired_total", "", "Routes dropped with their lease") \
    X(generation_routes_dropped, COUNTER, "master_generation_routes_dropped_total", "", "Replicas dropped because their owner's generation changed") \
    X(error_replies, COUNTER, "master_error_replies_total", "", "KV requests answered with an error")          \
    X(evict_batches, COUNTER, "master_evict_batches_total", "", "EVICT batches received")                      \
    X(evicted_replicas, COUNTER, "master_evicted_replicas_total", "", "Replicas dropped by eviction")          \
    X(evict_stale, COUNTER, "master_evict_stale_total", "", "Eviction entries refused as stale")               \
    X(evict_routes_deleted, COUNTER, "master_evict_routes_deleted_total", "", "Routes deleted by eviction")    \
    X(evict_to_disk, COUNTER, "master_evict_to_disk_total", "", "Replicas an owner moved to its disk tier (issue 39)") \
    X(places, COUNTER, "master_places_total", "", "PUT_PLACE requests")                                        \
    X(place_remote, COUNTER, "master_placements_total", "where=\"remote\"", "Placement decisions")              \
    X(place_local, COUNTER, "master_placements_total", "where=\"local\"", "")                                   \
    X(place_rejected, COUNTER, "master_placements_total", "where=\"rejected\"", "")                             \
    X(place_fallback, COUNTER, "master_placements_total", "where=\"fallback\"", "")                             \
    X(revokes, COUNTER, "master_revokes_total", "", "PUT_REVOKE received")                                     \
    X(revokes_abandoned, COUNTER, "master_revokes_abandoned_total", "", "PUT_REVOKE of a push that may still land: ranges kept until the TTL (W4)") \
    X(range_quarantines, COUNTER, "master_range_quarantines_total", "", "Owners whose segment took no new range (placed, appended, grant) for a while: they had another master (W2)") \
    X(range_quarantine_skips, COUNTER, "master_range_quarantine_skips_total", "", "Placements and appends that passed over a quarantined owner") \
    X(range_reuse_delayed, COUNTER, "master_range_reuse_delayed_total", "", "Ranges freed into the reuse delay (range_reuse_delay_ms): readers copying them need no GET_DONE answer first") \
    X(range_reuse_undelayed, COUNTER, "master_range_reuse_lost_nomem_total", "", "Ranges never freed for want of memory for their reuse delay (lost until the owner registers anew)") \
    X(lookup_early_reads, COUNTER, "master_lookup_early_reads_total", "", "LOOKUP hits on a ranged replica whose copy may be read before its GET_DONE answer (reuse_ms)") \
    X(range_quarantine_grants, COUNTER, "master_range_quarantine_grants_total", "", "Grants handed to an owner in range quarantine: from the grant-only lower part of its segment, where no push lands (W2)") \
    X(range_quarantine_grants_refused, COUNTER, "master_range_quarantine_grants_refused_total", "", "GRANTs refused (BUSY) to an owner in range quarantine: its grant-only part was full") \
    X(range_quarantines_expired, COUNTER, "master_range_quarantines_expired_total", "", "Range quarantines ended by their bound (range_quarantine_ms): an owner awaited did not come back, or none were known") \
    X(range_quarantines_lifted, COUNTER, "master_range_quarantines_lifted_total", "", "Range quarantines ended early: every owner the earlier master announced was back with no push to it unsettled") \
    X(inflight_expired, COUNTER, "master_inflight_expired_total", "", "In-flight records expired by the TTL")  \
    X(placed_confirmed, COUNTER, "master_placed_confirmed_total", "", "Placed put batches answered once their target confirmed recording them (PLACED answered)") \
    X(placed_unconfirmed, COUNTER, "master_placed_unconfirmed_total", "", "Placed put batches answered without their target's confirmation (an error, no answer within a quarter of master_timeout_ms, or one such lately: heartbeat_timeout_ms of no waiting for that target)") \
    X(forget_msgs, COUNTER, "master_forget_messages_total", "", "FORGET frames sent: an appender's copies dropped (issue 38, forget.c)") \
    X(forget_copies, COUNTER, "master_forget_copies_total", "", "Appended copies dropped whose appender was told (FORGET)") \
    X(forget_all_sent, COUNTER, "master_forget_all_total", "", "Copies dropped with no memory to name them: their appender was told to forget every record") \
    X(put_done_stale_token, COUNTER, "master_put_done_stale_token_total", "", "PUT_DONE with an unknown placement token") \
    X(put_dedup_forgotten, COUNTER, "master_put_dedup_forgotten_total", "", "Dedup records swept")             \
    X(put_done_too_old, COUNTER, "master_put_done_too_old_total", "", "PUT_DONE older than the dedup window")     \
    X(grants_returned, COUNTER, "master_grants_returned_total", "", "Idle grants owners gave back to the allocator") \
    X(republish_batches, COUNTER, "master_republish_batches_total", "", "REPUBLISH batches received (issue 17)")   \
    X(republished, COUNTER, "master_republished_keys_total", "outcome=\"routed\"", "Re-published keys by outcome") \
    X(republish_stale, COUNTER, "master_republished_keys_total", "outcome=\"stale\"", "")                        \
    X(republish_replaced, COUNTER, "master_republished_keys_total", "outcome=\"replaced\"", "")                  \
    X(republish_refused, COUNTER, "master_republished_keys_total", "outcome=\"refused\"", "")                    \
    X(republish_deleted, COUNTER, "master_republished_keys_total", "outcome=\"deleted\"", "")                  \
    X(delete_tombstones, COUNTER, "master_delete_tombstones_total", "", "DELETEs remembered while owners re-publish to a new master, so that a copy reported later does not bring the key back (W6)") \
    X(deletes_held, COUNTER, "master_deletes_held_total", "", "DELETEs that waited for an owner re-publishing to a new master, so that its copy is dropped too (W6)") \
    X(deletes_held_expired, COUNTER, "master_deletes_held_expired_total", "", "Held DELETEs served before that owner's report was in (their bound ran out): answered UNKNOWN_OUTCOME") \
    X(route_tombstones, COUNTER, "master_route_tombstones_total", "", "Routes removed (last copy evicted, lease ended) while an owner was awaited by a new master: a later report of an older version answers STALE") \
    X(route_tombstones_full, COUNTER, "master_route_tombstones_full_total", "", "Routes removed while an owner was awaited that the full record of tombstones could not hold") \
    X(delete_tombstones_full, COUNTER, "master_delete_tombstones_full_total", "", "DELETEs answered UNKNOWN_OUTCOME in the re-publication window because its record of deletes was full") \
    X(republish_owners_done, COUNTER, "master_republish_owners_done_total", "", "Owners whose re-publication ended") \
    X(verify_routed, COUNTER, "master_verified_keys_total", "outcome=\"routed\"", "Keys an owner back on a lost connection verified (REPUBLISH verify), by outcome") \
    X(verify_stale, COUNTER, "master_verified_keys_total", "outcome=\"stale\"", "")                              \
    X(prefix_index_builds, COUNTER, "master_prefix_index_builds_total", "", "Prefix indexes built by a LIST (issue 18)")

/* append.c (issue 16): replica tasks to remote_cache targets, hits by tier, demotion */
#define FX_MASTER_APPEND_METRICS(X)                                                                              \
    X(append_inflight, GAUGE, "master_append_inflight", "", "Appends (replica copies) in flight")                \
    X(append_inflight_keys, GAUGE, "master_append_inflight_keys", "", "Keys of the appends in flight")           \
    X(target_cold_entries, GAUGE, "master_target_cold_entries", "", "Replicas held only by a replica target")    \
    X(append_requests, COUNTER, "master_append_requests_total", "", "APPEND_START requests")                     \
    X(append_started, COUNTER, "master_appends_started_total", "", "Appends started (ranges allocated)")         \
    X(append_keys_started, COUNTER, "master_append_keys_total", "outcome=\"started\"", "Append keys by outcome") \
    X(append_keys_completed, COUNTER, "master_append_keys_total", "outcome=\"completed\"", "")                   \
    X(append_keys_obsolete, COUNTER, "master_append_keys_total", "outcome=\"obsolete\"", "")                     \
    X(append_keys_failed_transfer, COUNTER, "master_append_keys_total", "outcome=\"failed_transfer\"", "")       \
    X(append_keys_expired, COUNTER, "master_append_keys_total", "outcome=\"expired\"", "")                       \
    X(append_keys_abandoned, COUNTER, "master_append_keys_abandoned_total", "", "Keys of failed pushes that may still land: ranges kept until the TTL (W4)") \
    X(append_rejected_stale, COUNTER, "master_append_rejected_total", "reason=\"stale\"", "APPEND_START refused by reason") \
    X(append_rejected_busy, COUNTER, "master_append_rejected_total", "reason=\"busy\"", "")                      \
    X(append_rejected_no_target, COUNTER, "master_append_rejected_total", "reason=\"no_target\"", "")            \
    X(append_rejected_no_space, COUNTER, "master_append_rejected_total", "reason=\"no_space\"", "")              \
    X(append_rejected_room_coming, COUNTER, "master_append_rejected_total", "reason=\"room_coming\"", "")        \
    X(append_keys_already, COUNTER, "master_append_keys_already_total", "", "Append keys already on a target")  \
    X(append_done_unknown, COUNTER, "master_append_done_unknown_total", "", "APPEND_DONE for no append in flight") \
    X(target_replicas_remote_cache, COUNTER, "master_replica_targets_total", "role=\"remote_cache\"", "Replicas added by appends, by target role") \
    X(target_replicas_gpu_owner, COUNTER, "master_replica_targets_total", "role=\"gpu_owner\"", "")              \
    X(target_cold_dropped, COUNTER, "master_target_cold_dropped_total", "", "Target-only replicas dropped")      \
    X(target_cold_routes_deleted, COUNTER, "master_target_cold_routes_deleted_total", "", "Routes deleted with their last target replica") \
    X(append_placed_told, COUNTER, "master_append_placed_told_total", "", "Appended copies their target was told of (PLACED: it re-publishes them to a later master)") \
    X(target_cold_compactions, COUNTER, "master_target_cold_compactions_total", "", "Passes over the targets' oldest-first list that removed the entries no longer naming a replica") \
    X(target_cold_listed, COUNTER, "master_target_cold_listed_total", "", "Ranged target replicas no append made (placed puts, re-published ranges) listed oldest-first for dropping") \
    X(hits_local, COUNTER, "master_lookup_hits_by_tier_total", "tier=\"local\"", "Lookup hits by the tier that serves them") \
    X(hits_remote_gpu, COUNTER, "master_lookup_hits_by_tier_total", "tier=\"remote_gpu_owner\"", "")             \
    X(hits_cpu_owner, COUNTER, "master_lookup_hits_by_tier_total", "tier=\"cpu_owner\"", "")                     \
    X(evict_demoted, COUNTER, "master_evicted_groups_total", "outcome=\"demoted\"", "Evicted groups: demoted (a copy kept on a target) or dropped") \
    X(evict_dropped, COUNTER, "master_evicted_groups_total", "outcome=\"dropped\"", "")                          \
    X(target_refreshed, COUNTER, "master_target_refreshed_total", "", "Target replicas moved to their cold FIFO's tail by a write-back that found them (APPEND_START: already)") \
    X(target_refreshed_at_evict, COUNTER, "master_target_refreshed_at_evict_total", "", "Target replicas moved to their cold FIFO's tail when a GPU owner evicted its own copy of the value (a demotion), unless among the newest eighth") \
    X(target_touched, COUNTER, "master_target_touched_total", "", "Keys of TOUCH: copies a GPU owner read back for its readers only (a first read-back, issue 38)") \
    X(target_refreshed_at_read, COUNTER, "master_target_refreshed_at_read_total", "", "Target replicas moved to their cold FIFO's tail by a TOUCH, unless among the newest eighth") \
    X(target_touch_stale, COUNTER, "master_target_touch_stale_total", "", "TOUCH keys with no alive target copy in a range at that version (gone or replaced meanwhile): skipped") \
    X(target_promoted_away, COUNTER, "master_target_promoted_away_total", "", "Target replicas left after a promotion") \
    X(target_ranges_invalidated, COUNTER, "master_target_ranges_invalidated_total", "", "Dropped target replicas with a range invalidated at their owner (its PLACED record goes, W1)")

/* the order of the master-stats document */
#define FX_MASTER_METRICS(X)                                                                                     \
    FX_MASTER_IDENTITY_METRICS(X) FX_MASTER_KV_GAUGES(X) FX_MASTER_KV_COUNTERS(X) FX_MASTER_INFLIGHT_METRICS(X)     \
    FX_MASTER_NODE_METRICS(X) FX_MASTER_APPEND_METRICS(X)

typedef struct fx_mmetrics {
    FX_MASTER_METRICS(FX_METRIC_FIELD)
} fx_mmetrics_t;

#endif
