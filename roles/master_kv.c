/* master_kv.c — TEMPORARY stub; replaced by the KV implementation. */
#include "master_int.h"

FX_INTERNAL int fx_master_kv_init(fx_master_t *m) { return FLUXON_OK; }
FX_INTERNAL void fx_master_kv_fini(fx_master_t *m) {}
FX_INTERNAL int fx_master_kv_node_registered(fx_master_t *m, master_node_t *n, uint64_t old_generation) { return FLUXON_OK; }
FX_INTERNAL void fx_master_kv_node_dead(fx_master_t *m, master_node_t *n) {}
FX_INTERNAL void fx_master_kv_node_free(fx_master_t *m, master_node_t *n) {}
FX_INTERNAL bool fx_master_kv_request(fx_master_t *m, master_peer_t *p, const fx_frame_header_t *h,
                                      const uint8_t *body, fx_arena_t *arena) { return false; }
FX_INTERNAL size_t fx_master_kv_stats_json(fx_master_t *m, char *buf, size_t cap) { return 0; }
