/* owner_metrics.h — THE owner's metric catalog. One row per number: the `fluxon stats`
 * JSON member (the row's name), the Prometheus family it feeds (fluxon_ + family, with
 * labels), its kind and help. fx_ometrics_t (the snapshot the reactor publishes) is
 * generated from it, and both renderers (stats.c: JSON and /metrics) walk it, so a name
 * cannot drift between the CLI and Prometheus.
 *
 * Adding a number: one row here, in the block of the module that owns it, and the one
 * assignment `m->name = ...` in that module's fx_o<module>_metrics (a counter kept in the
 * module's own state; histograms are fx_hist_t fed by fx_hist_observe). Rows of one family
 * stay adjacent (test_metrics checks it). Labels stay low-cardinality: never a key.
 *
 * X(name, KIND, family, labels, help) with KIND COUNTER | GAUGE | SGAUGE | BOOL | HIST | NSCOUNTER | MSGAUGE. */
#ifndef FX_OWNER_METRICS_H
#define FX_OWNER_METRICS_H

#include "metrics.h"

#define FX_OWNER_METRICS(X)                                                                                      \
    /* identity (stats.c) */                                                                                     \
    X(generation, GAUGE, "owner_generation", "", "This owner's registration generation")                         \
    X(segment_bytes, GAUGE, "owner_segment_bytes", "", "Size of the owner's shared segment: segment_bytes plus its header page") \
    /* stats.c: the test message chaos (issue 17; 0 unless the "test" section sets it) */                         \
    X(chaos_dropped, COUNTER, "owner_test_chaos_frames_total", "fault=\"dropped\"", "Control frames received that the test message chaos dropped, delayed or duplicated") \
    X(chaos_delayed, COUNTER, "owner_test_chaos_frames_total", "fault=\"delayed\"", "")                           \
    X(chaos_duplicated, COUNTER, "owner_test_chaos_frames_total", "fault=\"duplicated\"", "")                     \
    X(value_oracle_failures, COUNTER, "owner_test_value_oracle_failures_total", "", "Values whose first word was not their key's where they entered or left this owner (test.value_oracle)") \
    /* prefault.c */                                                                                             \
    X(segment_prefaulting, BOOL, "owner_segment_prefaulting", "", "1 while the owner faults its segment in")      \
    /* ext.c */                                                                                                  \
    X(externals, GAUGE, "owner_externals", "", "External clients connected on the owner socket")                 \
    X(requests, COUNTER, "owner_ext_frames_total", "", "Frames received from externals")                        \
    X(errors, COUNTER, "owner_ext_errors_total", "", "External frames refused (protocol error or unserved type)") \
    /* tenant.c (issue 42); per tenant: fluxon_owner_tenant_clients and                                          \
     * fluxon_owner_tenant_auth_failures_total{tenant=...}, rendered by stats.c from the configured tenants */    \
    X(tenant_auth_failures, COUNTER, "owner_auth_failures_total", "", "Clients refused at HELLO (cluster id or token, protocol, role, unknown tenant or wrong tenant_token)") \
    X(tenant_key_refusals, COUNTER, "owner_tenant_key_refusals_total", "", "Requests refused for a key no tenant may use (first byte 0x01) or too long with its tenant's namespace prefix") \
    /* pins.c (issue 42): pins with a TTL; per tenant: fluxon_owner_tenant_bytes, _pinned_bytes,                  \
     * _pin_budget_bytes, _hits_total, _misses_total, _evictions_total, _pins_refused_total{tenant=...} (stats.c) */ \
    X(pinned_bytes, GAUGE, "owner_pinned_bytes", "", "Slot bytes of the hot tier pinned (kept off eviction until their pin ends)") \
    X(pinned_values, GAUGE, "owner_pinned_values", "", "Values pinned")                                          \
    X(pin_budget_bytes, GAUGE, "owner_pin_budget_bytes", "", "Most slot bytes all tenants may pin together (pin_budget_ratio x the hot tier, or x the room placed values leave)") \
    X(pin_requests, COUNTER, "owner_pin_requests_total", "", "Requests to pin or unpin served: fluxon_pin calls, and puts carrying pin_ttl_ms (one per put, when it is published)") \
    X(pin_puts, COUNTER, "owner_pin_puts_total", "", "Puts carrying pin_ttl_ms, published (also counted in owner_pin_requests_total)") \
    X(pins_applied, COUNTER, "owner_pins_total", "outcome=\"applied\"", "Pins asked of this owner (a put's pin_ttl_ms per key, fluxon_pin per key), by outcome") \
    X(pins_refused, COUNTER, "owner_pins_total", "outcome=\"refused\"", "")                                       \
    X(pins_unpinned, COUNTER, "owner_pins_total", "outcome=\"unpinned\"", "")                                     \
    X(pins_written_back, COUNTER, "owner_pins_written_back_total", "", "Pinned groups queued for a copy on a replica target (write-back on: a pinned value is never evicted, so never written back otherwise)") \
    X(pins_expired, COUNTER, "owner_pins_expired_total", "", "Values whose pin expired (back to normal eviction)") \
    X(pins_refreshed, COUNTER, "owner_pins_refreshed_total", "", "Hits that restarted a pin (pin_refresh_on_hit)") \
    /* evict_quota.c (issue 42 quotas); per tenant: fluxon_owner_tenant_quota_bytes, _guaranteed_bytes,           \
     * _quota_refusals_total, _evictions_by_cause_total{tenant=...,cause=...} (stats.c) */                        \
    X(quota_refusals, COUNTER, "owner_quota_refusals_total", "", "Puts refused with NO_SPACE at put_start: their tenant's own values could not make room under its quota") \
    X(quota_changes, COUNTER, "owner_quota_changes_total", "", "Quotas or guarantees changed at run time (tenant set)") \
    X(quota_pushes, COUNTER, "owner_quota_pushes_total", "outcome=\"applied\"", "Quota changes other owners made, pushed by the master, by outcome (refused: this owner's checks, logged)") \
    X(quota_push_refusals, COUNTER, "owner_quota_pushes_total", "outcome=\"refused\"", "")                         \
    X(evictions_quota, COUNTER, "owner_evictions_by_cause_total", "cause=\"quota\"", "Values evicted from the hot tier, by cause: their tenant's own quota, or pressure (claims waiting, the watermark)") \
    X(evictions_pressure, COUNTER, "owner_evictions_by_cause_total", "cause=\"pressure\"", "")                     \
    X(ext_unknown_ids, COUNTER, "owner_ext_unknown_ids_total", "", "Holder ids and get handles externals released or consumed that the owner does not know (logged at most once a second per external)") \
    /* master_link.c */                                                                                          \
    X(master_connected, BOOL, "owner_master_connected", "", "1 while the owner is registered with the master")   \
    X(master_generation, GAUGE, "owner_master_generation", "", "The master's generation this owner knows")       \
    X(forwarded, COUNTER, "owner_forwarded_total", "", "External requests forwarded to the master")             \
    X(heartbeats_sent, COUNTER, "owner_heartbeats_total", "result=\"sent\"", "Heartbeats to the master")         \
    X(heartbeat_failures, COUNTER, "owner_heartbeats_total", "result=\"failed\"", "")                            \
    X(owners_alive, SGAUGE, "owner_cluster_owners_alive", "", "Alive owners the master last reported (-1 unknown)") \
    /* store.c */                                                                                                \
    X(index_keys, GAUGE, "owner_index_keys", "", "Keys visible in this owner's index")                           \
    X(holders, GAUGE, "owner_holders", "", "Holders (pins) open on this owner's slots")                          \
    X(invalidations, COUNTER, "owner_invalidations_total", "", "Invalidations received from the master")         \
    X(invalidations_malformed, COUNTER, "owner_invalidations_malformed_total", "", "Invalidations that did not decode") \
    X(slot_collisions, COUNTER, "owner_slot_collisions_total", "", "Entries made in a slot another live entry held (never expected: logged with both keys)") \
    X(slots_free, GAUGE, "owner_slots", "state=\"free\"", "Slots per state")                                     \
    X(slots_prepared, GAUGE, "owner_slots", "state=\"prepared\"", "")                                            \
    X(slots_pending, GAUGE, "owner_slots", "state=\"pending\"", "")                                              \
    X(slots_committed, GAUGE, "owner_slots", "state=\"committed\"", "")                                          \
    X(slots_draining, GAUGE, "owner_slots_draining", "", "Slots dropped while readers still hold them")         \
    X(slot_holder_refs, GAUGE, "owner_slot_holder_refs", "", "Holder references on slots")                       \
    X(grants, GAUGE, "owner_grants", "", "Sub-grants of the slot pool: pieces of the master grants carved for one slot size each (master_grants: the whole grants, at most max_grants)")                            \
    X(granted_bytes, GAUGE, "owner_granted_bytes", "", "Bytes of the segment under grants")                      \
    X(used_bytes, GAUGE, "owner_segment_used_bytes", "", "Bytes of the segment in non-free slots")              \
    X(free_bytes, GAUGE, "owner_segment_free_bytes", "", "Bytes of the segment's payload (past its header page) not in a non-free slot") \
    /* claims.c */                                                                                               \
    X(max_grants, GAUGE, "owner_max_grants", "", "Most grants this owner may hold")                             \
    X(grants_received, COUNTER, "owner_grants_received_total", "", "Grants received from the master")           \
    X(claim_waits, COUNTER, "owner_claim_waits_total", "", "Slot claims that had to wait for room")             \
    X(claim_timeouts, COUNTER, "owner_claim_timeouts_total", "", "Slot claims that timed out waiting for room")  \
    X(grants_returned, COUNTER, "owner_grants_returned_total", "", "Idle grants given back to the master")       \
    X(grants_recarved, COUNTER, "owner_grants_recarved_total", "", "Idle grants re-carved for another slot size") \
    X(grants_returning, GAUGE, "owner_grants_returning", "", "Grant returns not yet confirmed by the master")     \
    X(grant_overlaps, COUNTER, "owner_grant_overlaps_total", "", "Grants or placed values the master gave in a range overlapping a grant this owner holds: not used, logged (never expected)") \
    X(claim_no_space, COUNTER, "owner_claim_no_space_total", "", "Slot claims answered NO_SPACE")               \
    X(claim_scans, COUNTER, "owner_claim_scans_total", "", "Walks over the grants for free chunks or an idle sub-grant (issue 44)") \
    X(master_grants, GAUGE, "owner_master_grants", "", "Grants held from the master's allocator")              \
    X(grant_chunks, GAUGE, "owner_grant_chunks", "", "Sub-grant chunks a master grant is carved into")         \
    /* put.c */                                                                                                  \
    X(puts_inflight, GAUGE, "owner_put_plans_open", "", "Put plans open (claimed, prepared or publishing)")     \
    X(puts_started, COUNTER, "owner_puts_total", "stage=\"started\"", "Put batches by stage reached")           \
    X(puts_committed, COUNTER, "owner_puts_total", "stage=\"committed\"", "")                                   \
    X(puts_published, COUNTER, "owner_puts_total", "stage=\"published\"", "")                                   \
    X(puts_aborted, COUNTER, "owner_puts_total", "stage=\"aborted\"", "")                                       \
    X(put_keys_published, COUNTER, "owner_put_keys_published_total", "", "Keys published to the master")       \
    X(put_rejected, COUNTER, "owner_put_rejected_total", "", "Put batches the master rejected")                 \
    X(put_done_retries, COUNTER, "owner_put_done_retries_total", "", "PUT_DONE resent after an uncertain outcome") \
    X(put_inline_answered_uncertain, COUNTER, "owner_put_inline_answered_uncertain_total", "", "Puts answered UNKNOWN_OUTCOME at their caller's deadline, the master's word still to come (issue 44 L3)") \
    X(put_plans_expired, COUNTER, "owner_put_plans_expired_total", "", "Prepared plans never committed in time") \
    X(put_value_bytes, COUNTER, "owner_value_bytes_total", "op=\"put\"", "Value bytes committed by puts, and answered as transferable by gets") \
    X(get_value_bytes, COUNTER, "owner_value_bytes_total", "op=\"get\"", "") /* get.c fills it (family kept adjacent) */ \
    X(put_start_latency, HIST, "owner_put_start_seconds", "", "put_start: request to answer (slots claimed, placed)") \
    X(commit_latency, HIST, "owner_commit_seconds", "phase=\"local_ready\"", "put commit: request to local-ready answer, and to global publish") \
    X(publish_latency, HIST, "owner_commit_seconds", "phase=\"global\"", "")                                    \
    /* place.c */                                                                                                \
    X(place_requests, COUNTER, "owner_place_requests_total", "", "PUT_PLACE requests to the master")            \
    X(placed_remote, COUNTER, "owner_placements_total", "where=\"remote\"", "Placement outcomes")               \
    X(placed_local, COUNTER, "owner_placements_total", "where=\"local\"", "")                                   \
    X(place_fallbacks, COUNTER, "owner_placements_total", "where=\"fallback\"", "")                             \
    X(pushed_keys, COUNTER, "owner_pushed_keys_total", "", "Keys pushed to a remote owner")                     \
    X(pushed_bytes, COUNTER, "owner_pushed_bytes_total", "", "Bytes pushed to a remote owner")                  \
    X(revokes_sent, COUNTER, "owner_revokes_total", "", "PUT_REVOKE sent for abandoned placements")             \
    X(push_master_lost, COUNTER, "owner_push_master_lost_total", "", "Placements never pushed: the master connection was lost since") \
    X(push_latency, HIST, "owner_push_seconds", "", "Push of a put batch to its remote target")                 \
    X(pushes_unsettled, GAUGE, "owner_pushes_unsettled", "", "Pushes into other owners' segments not retired by UCX yet (their bytes may still land; W2)") \
    X(pushes_held_after_report, COUNTER, "owner_pushes_held_after_report_total", "", "Pushes reported failed (a timeout) before UCX retired them: kept unsettled until it did") \
    X(peers_failed_dead, COUNTER, "owner_peers_failed_dead_total", "", "UCX peers failed at once because the master no longer lists their owner (dead, or a new process)") \
    X(peers_mapped, GAUGE, "owner_peers_mapped", "", "Owners on this host whose segment is mapped here: transfers with them are memcpy (peer_segments)") \
    X(peers_mapped_listed, COUNTER, "owner_peers_mapped_listed_total", "", "Owners on this host whose segment was mapped here when the master listed them (CLUSTER_INFO), not at a first transfer") \
    X(peers_prefaulting, GAUGE, "owner_peers_prefaulting", "", "Mapped peer segments being faulted in here now (a thread each)") \
    X(peers_exited, COUNTER, "owner_peers_exited_total", "", "Mapped peer owners whose process exited (seen at once by their pidfd): unmapped, their UCX peer failed") \
    X(peer_map_transfers, COUNTER, "owner_peer_map_transfers_total", "", "Transfer batches copied through a mapped peer segment") \
    X(peer_map_bytes, COUNTER, "owner_peer_map_bytes_total", "", "Bytes copied through mapped peer segments") \
    X(peer_map_ns, NSCOUNTER, "owner_peer_map_seconds_total", "", "Time the copies through mapped peer segments took (the copies only)") \
    /* get.c */                                                                                                  \
    X(handles_open, GAUGE, "owner_handles_open", "", "Get handles not yet consumed")                           \
    X(gets_inflight, GAUGE, "owner_gets_inflight", "", "Keys with a fetch in flight")                           \
    X(get_batches, COUNTER, "owner_get_batches_total", "", "get_start batches")                                 \
    X(get_keys, COUNTER, "owner_get_keys_total", "", "Keys asked by get_start")                                 \
    X(local_hits, COUNTER, "owner_get_hits_total", "tier=\"local\"", "Keys served, by tier: already here, joined an in-flight fetch, led a fetch") \
    X(joined_hits, COUNTER, "owner_get_hits_total", "tier=\"joined\"", "")                                      \
    X(leader_hits, COUNTER, "owner_get_hits_total", "tier=\"leader\"", "")                                      \
    X(joined, COUNTER, "owner_get_fetch_keys_total", "role=\"joined\"", "Keys not here: joined or led a fetch")  \
    X(leaders, COUNTER, "owner_get_fetch_keys_total", "role=\"leader\"", "")                                    \
    X(misses, COUNTER, "owner_get_misses_total", "", "Keys get_start answered as missing")                      \
    X(keys_past_miss, COUNTER, "owner_get_keys_past_miss_total", "", "Keys get_start never looked at: an owner alone stops at the first miss, which settles the answer") \
    X(miss_not_found, COUNTER, "owner_get_miss_reasons_total", "reason=\"not_found\"", "Missing keys by reason")  \
    X(miss_unavailable, COUNTER, "owner_get_miss_reasons_total", "reason=\"unavailable\"", "")                  \
    X(miss_no_space, COUNTER, "owner_get_miss_reasons_total", "reason=\"no_space\"", "")                        \
    X(miss_timeout, COUNTER, "owner_get_miss_reasons_total", "reason=\"timeout\"", "")                          \
    X(miss_nomem, COUNTER, "owner_get_miss_reasons_total", "reason=\"nomem\"", "")                              \
    X(miss_internal, COUNTER, "owner_get_miss_reasons_total", "reason=\"internal\"", "")                        \
    X(miss_client_limit, COUNTER, "owner_get_miss_reasons_total", "reason=\"client_limit\"", "")                \
    X(client_limit_pins, COUNTER, "owner_client_limit_refusals_total", "limit=\"max_pinned_bytes\"", "Requests refused because the client held its client_limits share (issue 44)") \
    X(client_limit_handles, COUNTER, "owner_client_limit_refusals_total", "limit=\"max_handles\"", "") \
    X(client_limit_plans, COUNTER, "owner_client_limit_refusals_total", "limit=\"max_plans\"", "") \
    X(clients_expired, COUNTER, "owner_clients_expired_total", "", "Clients disconnected because a pin outlived client_limits.pin_expire_ms") \
    X(prefix_raw_keys, COUNTER, "owner_get_prefix_keys_total", "kind=\"raw\"", "Prefix keys of get_start answers: raw hits and transferable") \
    X(prefix_transferable_keys, COUNTER, "owner_get_prefix_keys_total", "kind=\"transferable\"", "")            \
    X(handles_opened, COUNTER, "owner_handles_opened_total", "", "Get handles opened")                          \
    X(prefetch_requests, COUNTER, "owner_prefetch_requests_total", "", "PREFETCH requests (issue 39: keys a get will ask for soon)") \
    X(prefetch_keys, COUNTER, "owner_prefetch_keys_total", "", "Keys named by PREFETCH requests")                 \
    X(prefetch_reads, COUNTER, "owner_prefetch_reads_total", "", "Disk read-backs a PREFETCH started (the key was on disk, not in memory, not being fetched)") \
    X(prefetch_bad_keys, COUNTER, "owner_prefetch_bad_keys_total", "", "PREFETCH keys (or bodies) skipped as malformed") \
    X(prefetch_joined, COUNTER, "owner_prefetch_joined_total", "", "Get keys that joined a prefetch's read in flight") \
    X(prefetch_past_prefix, COUNTER, "owner_prefetch_past_prefix_total", "", "PREFETCH keys after one held nowhere: not fetched (the get's prefix ends there)") \
    X(prefetch_lookups, COUNTER, "owner_prefetch_lookups_total", "", "PREFETCH keys neither in memory nor on disk here, looked up at the master for a copy from another owner") \
    X(prefetch_copies, COUNTER, "owner_prefetch_copies_total", "", "Copies from another owner a PREFETCH made (published, kept)") \
    X(prefetch_temp_skipped, COUNTER, "owner_prefetch_temp_skipped_total", "", "PREFETCH keys not fetched: the master allowed only a temporary copy and no get waited") \
    X(prefetch_no_room, COUNTER, "owner_prefetch_no_room_total", "", "PREFETCH keys not fetched: no slot was free without waiting for eviction (a hint never makes a put wait)") \
    X(get_start_latency, HIST, "owner_get_start_seconds", "", "get_start: request to answer")                  \
    X(ring_wait, HIST, "owner_ring_wait_seconds", "", "A request on the shared-memory rings: posted by the client to taken by the owner's reactor") \
    /* fetch.c */                                                                                                \
    X(lookup_batches, COUNTER, "owner_lookup_batches_total", "", "LOOKUP batches to the master")                \
    X(lookups_skipped, COUNTER, "owner_lookups_skipped_total", "", "Lookups skipped (no other owner alive)")    \
    X(transfers, COUNTER, "owner_fetch_transfers_total", "", "UCX transfers from remote owners")               \
    X(transfer_keys, COUNTER, "owner_fetch_transfer_keys_total", "", "Keys in UCX transfers")                  \
    X(transfer_bytes, COUNTER, "owner_fetch_transfer_bytes_total", "", "Bytes fetched over UCX")               \
    X(remote_hits, COUNTER, "owner_fetch_hits_total", "source=\"gpu_owner\"", "Keys fetched, by source owner kind") \
    X(cpu_hits, COUNTER, "owner_fetch_hits_total", "source=\"cpu_owner\"", "")                                  \
    X(reuse_hits, COUNTER, "owner_fetch_reuse_hits_total", "", "Fetches answered by a copy already here")      \
    X(self_copies, COUNTER, "owner_fetch_self_copies_total", "", "Keys copied within this segment")            \
    X(disk_hits, COUNTER, "owner_fetch_disk_hits_total", "", "Keys read back from this owner's disk tier (issue 39)") \
    X(disk_direct, COUNTER, "owner_fetch_disk_direct_total", "", "Keys read from this owner's disk without a LOOKUP (its index is current)") \
    X(disk_temp, COUNTER, "owner_fetch_disk_temporary_total", "", "Keys read back from disk for their readers only (a first read: not promoted)") \
    X(disk_promoted_early, COUNTER, "owner_fetch_disk_promoted_early_total", "", "Promotions from disk served to their readers before the master recorded the copy") \
    X(read_before_get_done, COUNTER, "owner_fetch_read_before_get_done_total", "", "Copies of ranged replicas served before GET_DONE's answer: they ended 1 ms before the master's range_reuse_delay_ms from their LOOKUP (issue 38)") \
    X(wb_reads, COUNTER, "owner_fetch_wb_reads_total", "", "Values read back from a copy this owner wrote back, by its record, without a LOOKUP (issue 38, wbmap.c)") \
    X(wb_reads_late, COUNTER, "owner_fetch_wb_reads_late_total", "", "Of those, reads that ended too late for the record's rule: thrown away and asked of the master") \
    X(wb_temp, COUNTER, "owner_fetch_wb_temporary_total", "", "Reads by this owner's record that were a copy's first read-back: served to their readers only, not promoted (the second read promotes)") \
    X(wb_touched, COUNTER, "owner_fetch_wb_touched_total", "", "Keys of such first reads sent to the master in a TOUCH (it moves their copies to the young end of the target's list, unless among its newest eighth)") \
    X(wb_touch_lost, COUNTER, "owner_fetch_wb_touch_lost_total", "", "Keys of such first reads not sent (no master link, no memory, the owner stopping): their copies age as they were") \
    X(disk_misses, COUNTER, "owner_fetch_disk_misses_total", "", "Disk replicas that could not be read (gone, checksum): misses") \
    X(temp_copies, COUNTER, "owner_fetch_temp_copies_total", "", "Fetched copies kept as temporary")           \
    X(get_done_stale, COUNTER, "owner_get_done_stale_total", "", "GET_DONE answers saying the copy is stale")   \
    X(get_relookups, COUNTER, "owner_get_relookups_total", "", "Keys looked up again: their copy's version was replaced meanwhile") \
    X(get_done_resends, COUNTER, "owner_get_done_resends_total", "", "GET_DONE resent after an uncertain outcome") \
    X(get_done_readers_timed_out, COUNTER, "owner_get_done_readers_timed_out_total", "", "Keys answered as misses at their readers' deadline while the master's word on their copy was still unknown (issue 44 L3)") \
    X(fetch_slots_held, GAUGE, "owner_fetch_slots_held", "", "Destination slots of failed fetches kept until UCX retires the GET (W4)") \
    X(fetch_slots_held_total, COUNTER, "owner_fetch_slots_held_total", "", "Destination slots of failed fetches kept until UCX retired the GET") \
    X(fetch_slots_hold_overflow, COUNTER, "owner_fetch_slots_hold_overflow_total", "", "Failed fetches' slots freed at once: the hold bound (segment_bytes / 8) was reached") \
    X(fetch_latency, HIST, "owner_remote_fetch_seconds", "", "Remote fetch: LOOKUP sent to transfer done")     \
    X(transfer_latency, HIST, "owner_get_transfer_seconds", "", "UCX transfer of a fetch batch")                \
    /* evict.c */                                                                                                \
    X(hot_bytes, GAUGE, "owner_hot_bytes", "", "Bytes in the hot tier")                                        \
    X(hot_values, GAUGE, "owner_hot_values", "", "Values in the hot tier")                                     \
    X(hot_capacity_bytes, GAUGE, "owner_hot_capacity_bytes", "", "The hot tier's watermark")                   \
    X(evictions, COUNTER, "owner_evictions_total", "", "Values evicted")                                       \
    X(evicted_bytes, COUNTER, "owner_evicted_bytes_total", "", "Bytes evicted")                                \
    X(cohorts, COUNTER, "owner_evict_cohorts_total", "", "Eviction cohorts sent to the master")                \
    X(busy_retries, COUNTER, "owner_evict_busy_retries_total", "", "Evictions retried because a reader held the value") \
    X(left_hot, COUNTER, "owner_demotions_total", "", "Values that left the hot tier")                         \
    X(restored, COUNTER, "owner_evict_restored_total", "", "Selected values restored (the master kept them)")  \
    X(selected_bytes, COUNTER, "owner_evict_selected_bytes_total", "", "Bytes selected for eviction")          \
    X(eviction_debt, GAUGE, "owner_selection_debt_bytes", "", "Bytes still to select to reach the watermark")  \
    X(evict_stale, COUNTER, "owner_evict_stale_total", "", "Eviction answers that were stale")                 \
    X(evict_resends, COUNTER, "owner_evict_resends_total", "", "EVICT resent after an uncertain outcome")      \
    X(grants_retired, COUNTER, "owner_grants_retired_total", "", "Grants emptied by eviction for another slot size") \
    X(claims_no_space_fast, COUNTER, "owner_claims_no_space_fast_total", "", "Claims refused at once: everything held") \
    X(evict_rounds, COUNTER, "owner_evict_rounds_total", "", "Eviction rounds run (issue 44)") \
    X(evict_walked, COUNTER, "owner_evict_walked_total", "", "Values eviction rounds looked at in the policy's order (issue 44: bounded per round)") \
    X(evict_wb_stuck_rounds, COUNTER, "owner_evict_wb_stuck_rounds_total", "", "Eviction rounds that looked for no copied value: the write-back queue full and no copy ended for 100 ms") \
    X(eviction_policy_lru, BOOL, "owner_eviction_policy", "policy=\"lru\"", "1 for the hot tier's eviction_policy") \
    X(eviction_policy_s3fifo, BOOL, "owner_eviction_policy", "policy=\"s3fifo\"", "")                             \
    X(eviction_policy_slru, BOOL, "owner_eviction_policy", "policy=\"slru\"", "")                                 \
    X(policy_promotions, COUNTER, "owner_evict_policy_promotions_total", "", "Values the policy promoted to its main queue") \
    X(policy_ghost_hits, COUNTER, "owner_evict_policy_ghost_hits_total", "", "Admissions the policy's ghost list recognised") \
    X(evict_copied, COUNTER, "owner_evict_demoted_total", "", "Values evicted with a complete copy on a replica target (write-back on)") \
    X(evict_dropped_behind, COUNTER, "owner_evict_dropped_total", "cause=\"behind\"", "Values evicted without a copy (write-back on): never copied, copy in flight, copy failed") \
    X(evict_dropped_copying, COUNTER, "owner_evict_dropped_total", "cause=\"copying\"", "")                   \
    X(evict_dropped_failed, COUNTER, "owner_evict_dropped_total", "cause=\"failed\"", "")                     \
    X(evict_not_admitted, COUNTER, "owner_evict_dropped_total", "cause=\"not_admitted\"", "")                 \
    X(evict_to_disk, COUNTER, "owner_evict_to_disk_total", "", "Evicted values whose replica moved to the disk tier (issue 39)") \
    X(evict_disk_not_admitted, COUNTER, "owner_evict_disk_not_admitted_total", "", "Evicted values disk.admission did not admit") \
    X(evict_disk_staging, GAUGE, "owner_evict_disk_staging", "", "Eviction cohorts whose disk copies are being made (their EVICT follows)") \
    X(evict_disk_stage_slices, COUNTER, "owner_evict_disk_stage_slices_total", "", "Reactor turns that made disk copies of victims (at most 8 each)") \
    X(evict_writeback_waits, COUNTER, "owner_evict_writeback_waits_total", "", "Eviction rounds' groups that waited for a copy (writeback_max_stall_ms)") \
    /* replica.c (issue 16): eager replica tasks and write-back to replica targets */                            \
    X(copies_recorded, COUNTER, "owner_copies_recorded_total", "", "Keys copied to other owners, recorded to settle misses locally") \
    X(misses_settled_locally, COUNTER, "owner_misses_settled_locally_total", "", "Local misses answered without a LOOKUP: never copied") \
    X(misses_settled_dropped, COUNTER, "owner_misses_settled_dropped_total", "", "Of those: keys whose copy the master dropped (FORGET) since") \
    X(copies_dropped_known, GAUGE, "owner_copies_dropped_known", "", "Keys whose copy the master dropped, kept to settle their misses") \
    X(copies_record_on, BOOL, "owner_copies_record_on", "", "1 while the record of copies settles misses") \
    X(repl_queued, GAUGE, "owner_replica_tasks_queued", "", "Replica tasks queued")                              \
    X(repl_inflight, GAUGE, "owner_replica_tasks_inflight", "", "Replica tasks in flight")                       \
    X(repl_tasks_eager, COUNTER, "owner_replica_tasks_total", "kind=\"eager\"", "Replica tasks enqueued, by kind") \
    X(repl_tasks_writeback, COUNTER, "owner_replica_tasks_total", "kind=\"writeback\"", "")                      \
    X(repl_completed, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"completed\"", "Replica tasks by outcome") \
    X(repl_already, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"already\"", "")                     \
    X(repl_obsolete, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"obsolete\"", "")                   \
    X(repl_failed_no_space, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"failed_no_space\"", "")     \
    X(repl_failed_busy, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"failed_busy\"", "")             \
    X(repl_failed_stale, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"failed_stale\"", "")           \
    X(repl_failed_transfer, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"failed_transfer\"", "")     \
    X(repl_failed_master, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"failed_master\"", "")         \
    X(repl_failed_queue_full, COUNTER, "owner_replica_task_outcomes_total", "outcome=\"failed_queue_full\"", "") \
    X(repl_busy_retries, COUNTER, "owner_replica_busy_retries_total", "", "APPEND_START retried after KEY_BEING_WRITTEN") \
    X(repl_kept_after_fetch, COUNTER, "owner_replica_kept_after_fetch_total", "", "Values fetched from a replica target that keeps its copy: no write-back needed (FX_GET_SRC_KEPT)") \
    X(repl_kept_recorded, COUNTER, "owner_replica_kept_recorded_total", "", "Values hit after their write-back whose copy this owner's record still named when they got cold again: no write-back task (wbmap.c)") \
    X(repl_batches, COUNTER, "owner_replica_batches_total", "", "APPEND_START batches sent")                   \
    X(repl_push_slices, COUNTER, "owner_replica_push_slices_total", "", "Transfers the batches' pushes went in (a push to a mapped peer copies at most 32 KiB a reactor turn)") \
    X(repl_pushed_keys, COUNTER, "owner_replica_pushed_keys_total", "", "Keys pushed to replica targets")        \
    X(repl_pushed_bytes, COUNTER, "owner_replica_pushed_bytes_total", "", "Bytes pushed to replica targets")     \
    X(repl_push_ns, NSCOUNTER, "owner_replica_push_seconds_total", "", "Time spent in replica pushes: each transfer posted to reported, its callback at the next progress turn included (a push to a mapped peer goes in slices: the turns between them are not counted)") \
    /* republish.c (issue 17): re-publication to a master that did not know this owner */                     \
    X(republishing, BOOL, "owner_republishing", "", "1 while re-publishing to a new master")                       \
    X(republish_rounds, COUNTER, "owner_republish_rounds_total", "", "Re-publication rounds started")             \
    X(republish_batches, COUNTER, "owner_republish_batches_total", "", "REPUBLISH batches sent")                  \
    X(republish_keys, COUNTER, "owner_republish_keys_total", "", "Keys re-published")                             \
    X(republish_stale, COUNTER, "owner_republish_outcomes_total", "outcome=\"stale\"", "Re-published keys the master did not route, by outcome") \
    X(republish_refused, COUNTER, "owner_republish_outcomes_total", "outcome=\"refused\"", "")                  \
    X(republish_leased_dropped, COUNTER, "owner_republish_leased_dropped_total", "", "Leased values dropped instead of re-published") \
    X(republish_resends, COUNTER, "owner_republish_resends_total", "", "REPUBLISH batches resent")                 \
    X(republish_last_ms, MSGAUGE, "owner_republish_last_seconds", "", "Duration of the last re-publication") \
    X(republish_last_keys, GAUGE, "owner_republish_last_keys", "", "Keys of the last re-publication")             \
    X(republish_verify_rounds, COUNTER, "owner_republish_verify_rounds_total", "", "Verifications after a lost master connection (the same master again): what this owner serves checked against its routes") \
    X(republish_verify_dropped, COUNTER, "owner_republish_verify_dropped_total", "", "Copies a verification dropped: the master no longer routed them (an INVALIDATE lost with the connection)") \
    X(republish_routed_gone, COUNTER, "owner_republish_routed_gone_total", "", "Disk records a report routed after they went (its answer came later than their route drop): dropped again") \
    X(republish_newer_kept, COUNTER, "owner_republish_newer_kept_total", "", "Refused reports whose offset holds a newer placed value now: that record kept (R1)") \
    /* wbmap.c (issue 38): the record of the copies this owner wrote back, read back without a LOOKUP */ \
    X(wb_records, GAUGE, "owner_wb_records", "", "Copies this owner wrote back that it keeps a record of (read back without asking the master)") \
    X(wb_records_added, COUNTER, "owner_wb_records_added_total", "", "Records made: copies written back, confirmed by APPEND_DONE") \
    X(wb_records_forgotten, COUNTER, "owner_wb_records_forgotten_total", "", "Records dropped by the master's FORGET (the copy went)") \
    X(wb_records_cleared, COUNTER, "owner_wb_records_cleared_total", "", "Records dropped because the master link went or changed") \
    X(wb_records_full, COUNTER, "owner_wb_records_full_total", "", "Copies not recorded: the record was full (1,048,576)") \
    X(wb_forget_msgs, COUNTER, "owner_wb_forget_messages_total", "", "FORGET frames received") \
    X(placed_ranges_held, GAUGE, "owner_placed_ranges_held", "", "Values in ranges the master allocated here (placed puts, copies written back to this CPU owner), re-published to a later master")    \
    X(placed_malformed, COUNTER, "owner_placed_malformed_total", "", "PLACED messages that did not decode")   \
    /* disk.c and the store disk/ (issue 39): the disk tier */                                                  \
    X(disk_on, BOOL, "owner_disk_on", "", "1 while the disk tier is open")                                       \
    X(disk_direct_io, BOOL, "owner_disk_direct_io", "", "1 while the disk tier uses O_DIRECT")                   \
    X(disk_writes_failing, BOOL, "owner_disk_writes_failing", "", "1 while disk writes pause after a failure (disk full, directory gone): they retry") \
    X(disk_write_stops, COUNTER, "owner_disk_write_stops_total", "", "Times disk writes paused after a failed write or segment file creation") \
    X(disk_segment_waits, COUNTER, "owner_disk_segment_waits_total", "", "Segment switches that waited for the next file being made") \
    X(disk_direct_fallbacks, COUNTER, "owner_disk_direct_fallbacks_total", "", "O_DIRECT refused by the file system: buffered I/O instead") \
    X(disk_capacity_bytes, GAUGE, "owner_disk_capacity_bytes", "", "Bytes of segment files the disk tier may hold") \
    X(disk_used_bytes, GAUGE, "owner_disk_used_bytes", "", "Bytes of segment files the disk tier holds")         \
    X(disk_records, GAUGE, "owner_disk_records", "", "Values indexed in the disk tier")                          \
    X(disk_segments, GAUGE, "owner_disk_segments", "", "Segment files of the disk tier")                         \
    X(disk_appends, COUNTER, "owner_disk_appends_total", "", "Values copied into the disk tier")                 \
    X(disk_append_bytes, COUNTER, "owner_disk_append_bytes_total", "", "Key and value bytes copied into the disk tier") \
    X(disk_writes, COUNTER, "owner_disk_writes_total", "", "Writes of staging buffers and index blocks")         \
    X(disk_write_bytes, COUNTER, "owner_disk_write_bytes_total", "", "Bytes written to segment files")           \
    X(disk_write_errors, COUNTER, "owner_disk_write_errors_total", "", "Writes that failed")                     \
    X(disk_reads, COUNTER, "owner_disk_reads_total", "", "Values read from the disk tier")                       \
    X(disk_read_bytes, COUNTER, "owner_disk_read_bytes_total", "", "Bytes read from segment files")              \
    X(disk_reads_in_flight, GAUGE, "owner_disk_reads_in_flight", "", "Disk reads in flight")                     \
    X(disk_read_errors, COUNTER, "owner_disk_read_errors_total", "", "Disk reads that failed (I/O error)")        \
    X(disk_crc_failures, COUNTER, "owner_disk_checksum_failures_total", "", "Records that failed a check on read: a miss, never bytes served") \
    X(disk_staged_reads, COUNTER, "owner_disk_staged_reads_total", "", "Reads served from a staging buffer not yet written") \
    X(disk_read_latency, HIST, "owner_disk_read_seconds", "", "A record's read from the disk tier's file: asked to checked") \
    X(disk_read_ios, COUNTER, "owner_disk_read_ios_total", "", "Reads handed to the kernel (records side by side share one)") \
    X(disk_read_gap_bytes, COUNTER, "owner_disk_read_gap_bytes_total", "", "Bytes read only to join two records' reads into one (at most 16 KiB between them), dropped") \
    X(disk_segments_freed, COUNTER, "owner_disk_segments_freed_total", "", "Segments freed for room")     \
    X(disk_segments_recycled, COUNTER, "owner_disk_segments_recycled_total", "", "Segments written into a freed segment's file instead of a new one (no unlink, no discard)") \
    X(disk_recovered_records, GAUGE, "owner_disk_recovered_records", "", "Records re-indexed when the owner started") \
    X(disk_recovered_torn, GAUGE, "owner_disk_recovered_torn", "", "Segments whose torn tail was cut when the owner started") \
    X(disk_recovered_recycled, GAUGE, "owner_disk_recovered_recycled", "", "Unsealed segments found ending where their recycled file's earlier life goes on, when the owner started") \
    X(disk_recovered_killed, GAUGE, "owner_disk_recovered_killed", "", "Records a restart found dead (a tombstone or barrier after them)") \
    X(disk_tombstones, COUNTER, "owner_disk_tombstones_total", "", "Tombstones written: invalidated disk records stay dead across a restart") \
    X(disk_barriers, COUNTER, "owner_disk_barriers_total", "", "Barriers written: every record dropped (the master forgot this owner)") \
    X(disk_tomb_failures, COUNTER, "owner_disk_tomb_failures_total", "", "Tombstones or barriers that could not be staged (no room, writes paused)") \
    X(disk_contact_writes, COUNTER, "owner_disk_contact_writes_total", "", "DIR/CONTACT writes: a master heard from (W6)") \
    X(disk_stale_drops, COUNTER, "owner_disk_stale_drops_total", "", "Starts whose disk was dropped: the last contact with a master was longer ago than its dead_owner_grace_ms") \
    X(disk_recover_ms, MSGAUGE, "owner_disk_recover_seconds", "", "Time to re-index the disk tier when the owner started") \
    X(disk_move_refused, COUNTER, "owner_disk_move_refused_total", "", "Moves to disk the master refused (a newer version): record dropped") \
    X(disk_invalidate_other, COUNTER, "owner_disk_invalidate_other_total", "", "INVALIDATEs naming a disk offset that holds another record (or none) by now: nothing killed") \
    X(disk_demote_busy, COUNTER, "owner_disk_demote_busy_total", "", "Admitted victims dropped: no staging room (the disk is behind)") \
    X(disk_demote_failing, COUNTER, "owner_disk_demote_failing_total", "", "Admitted victims dropped while disk writes paused after a failure") \
    X(disk_demote_too_big, COUNTER, "owner_disk_demote_too_big_total", "", "Admitted victims larger than a disk segment takes (never go to disk)") \
    X(disk_demote_reused, COUNTER, "owner_disk_demote_reused_total", "", "Victims whose version was on disk already (read back earlier)") \
    X(disk_forgotten, COUNTER, "owner_disk_forgotten_total", "", "Routed disk replicas that could not be read: dropped at the master") \
    X(disk_retired_records, COUNTER, "owner_disk_retired_records_total", "", "Records of segments removed for room") \
    X(disk_routes_dropped, COUNTER, "owner_disk_routes_dropped_total", "", "Disk replicas unpublished at the master") \
    X(disk_route_drops_failed, COUNTER, "owner_disk_route_drops_failed_total", "", "Disk replicas whose unpublishing was given up")

typedef struct fx_ometrics {
    FX_OWNER_METRICS(FX_METRIC_FIELD)
} fx_ometrics_t;

#endif
