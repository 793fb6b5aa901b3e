/* test_ucx_local.c — Criterion suite for the UCX data plane's local path (issue 38): a peer
 * whose region is mapped in this process (owners of one host) is copied with memcpy at
 * submission, its callbacks still from progress (fx_ucx_completions_queued says they wait); a refused batch copies nothing; a peer
 * connected mapped makes its UCX endpoint only when a transfer needs one. */
#include "ucxself.h"

/* Issue 38: a peer whose region is mapped here (fx_ucx_peer_set_local): GET and PUT are
 * copies made at submission, their callbacks still deferred to progress; a range past the
 * mapping fails its batch (INVALID_ARGUMENT) without failing the peer; counted in
 * fx_ucx_local_stats; set_local(NULL) goes back to UCX. */
Test(ucx_local, a_locally_mapped_peer_copies_with_memcpy, .timeout = 60)
{
    tucx_self_t s;
    tucx_self_setup(&s, FX_UCX_MECH_AM);
    char *map = s.buf; /* the peer's region, seen here at the same address (one process) */
    fx_ucx_peer_set_local(s.p, map, TUCX_SELF_LEN);
    cr_assert_str_eq(fx_ucx_peer_mech_name(s.p), "local");
    memset(s.buf + TUCX_SELF_LEN, 0, 8192);
    fx_ucx_range_t g = {.local = s.buf + TUCX_SELF_LEN, .remote_offset = 4096, .len = 8192};
    tucx_done_t d = {0, 0, 0};
    cr_assert_eq(fx_ucx_transfer(s.u, s.p, FX_UCX_GET, &g, 1, tucx_cb, &d), FLUXON_OK);
    cr_assert_eq(d.fired, 0, "the callback waits for progress");
    cr_assert(fx_ucx_completions_queued(s.u), "and says so (the owner then runs progress on its loop's next turn)");
    cr_assert_eq(memcmp(s.buf + TUCX_SELF_LEN, map + 4096, 8192), 0, "copied at submission");
    cr_assert_gt(fx_ucx_progress(s.u), 0);
    cr_assert_eq(d.fired, 1, "one progress call runs it");
    cr_assert_not(fx_ucx_completions_queued(s.u));
    cr_assert_not(fx_ucx_completions_queued(NULL));
    cr_assert_eq(d.status, FLUXON_OK);
    tucx_fill(s.buf + TUCX_SELF_LEN, 4096, 7);
    fx_ucx_range_t p = {.local = s.buf + TUCX_SELF_LEN, .remote_offset = 100000, .len = 4096};
    d = (tucx_done_t){0, 0, 0};
    cr_assert_eq(fx_ucx_transfer(s.u, s.p, FX_UCX_PUT, &p, 1, tucx_cb, &d), FLUXON_OK);
    cr_assert(tucx_wait(s.u, &d, 10000));
    cr_assert_eq(d.status, FLUXON_OK);
    cr_assert_eq(memcmp(map + 100000, s.buf + TUCX_SELF_LEN, 4096), 0);
    fx_ucx_range_t past[2] = {{.local = s.buf + TUCX_SELF_LEN, .remote_offset = 0, .len = 16},
                              {.local = s.buf + TUCX_SELF_LEN, .remote_offset = TUCX_SELF_LEN - 100, .len = 4096}};
    d = (tucx_done_t){0, 0, 0};
    cr_assert_eq(fx_ucx_transfer(s.u, s.p, FX_UCX_PUT, past, 2, tucx_cb, &d), FLUXON_OK);
    cr_assert(tucx_wait(s.u, &d, 10000));
    cr_assert_eq(d.status, FLUXON_ERR_INVALID_ARGUMENT, "%s", fluxon_status_string(d.status));
    cr_assert_eq(memcmp(map, s.buf + 2 * TUCX_SELF_LEN - 1, 0), 0);
    cr_assert_neq(memcmp(map, s.buf + TUCX_SELF_LEN, 16), 0, "a refused batch copies nothing, its good ranges neither");
    cr_assert_eq(fx_ucx_peer_status(s.p), FLUXON_OK, "a range past the mapping is not a peer failure");
    uint64_t xfers = 0, bytes = 0;
    fx_ucx_local_stats(s.u, &xfers, &bytes);
    cr_assert_eq(xfers, 2, "the refused batch is not counted");
    cr_assert_eq(bytes, 8192 + 4096);
    fx_ucx_peer_set_local(s.p, NULL, 0);
    cr_assert_str_eq(fx_ucx_peer_mech_name(s.p), "am");
    d = (tucx_done_t){0, 0, 0};
    cr_assert_eq(fx_ucx_transfer(s.u, s.p, FX_UCX_GET, &g, 1, tucx_cb, &d), FLUXON_OK);
    cr_assert(tucx_wait(s.u, &d, 10000));
    cr_assert_eq(d.status, FLUXON_OK);
    fx_ucx_local_stats(s.u, &xfers, &bytes);
    cr_assert_eq(xfers, 2, "over UCX again");
    tucx_self_teardown(&s);
}

/* A peer connected mapped has no UCX endpoint until a transfer needs one: copies first,
 * then (set_local NULL) the endpoint is made at the next transfer, which lands over UCX. */
Test(ucx_local, a_peer_connected_mapped_makes_its_endpoint_when_first_needed, .timeout = 60)
{
    tucx_self_t s;
    tucx_self_setup(&s, FX_UCX_MECH_AM);
    const void *addr;
    size_t alen, rlen;
    void *rkey;
    cr_assert_eq(fx_ucx_worker_address(s.u, &addr, &alen), FLUXON_OK);
    cr_assert_eq(fx_ucx_rkey_pack(s.m, &rkey, &rlen), FLUXON_OK);
    fx_ucx_peer_t *mp = NULL;
    cr_assert_eq(fx_ucx_peer_connect_mapped(s.u, addr, alen, rkey, rlen, (uintptr_t)s.buf, NULL, 0, &mp),
                 FLUXON_ERR_INVALID_ARGUMENT, "a mapping is required");
    cr_assert_eq(fx_ucx_peer_connect_mapped(s.u, addr, alen, rkey, rlen, (uintptr_t)s.buf, s.buf, TUCX_SELF_LEN, &mp),
                 FLUXON_OK);
    fx_ucx_buf_free(rkey);
    cr_assert_str_eq(fx_ucx_peer_mech_name(mp), "local");
    memset(s.buf + TUCX_SELF_LEN, 0, 8192);
    fx_ucx_range_t g = {.local = s.buf + TUCX_SELF_LEN, .remote_offset = 4096, .len = 8192};
    tucx_done_t d = {0, 0, 0};
    cr_assert_eq(fx_ucx_transfer(s.u, mp, FX_UCX_GET, &g, 1, tucx_cb, &d), FLUXON_OK);
    cr_assert(tucx_wait(s.u, &d, 10000));
    cr_assert_eq(d.status, FLUXON_OK);
    cr_assert_eq(memcmp(s.buf + TUCX_SELF_LEN, s.buf + 4096, 8192), 0);
    fx_ucx_peer_set_local(mp, NULL, 0);
    memset(s.buf + TUCX_SELF_LEN, 0, 8192);
    d = (tucx_done_t){0, 0, 0};
    cr_assert_eq(fx_ucx_transfer(s.u, mp, FX_UCX_GET, &g, 1, tucx_cb, &d), FLUXON_OK);
    cr_assert(tucx_wait(s.u, &d, 10000));
    cr_assert_eq(d.status, FLUXON_OK, "%s", fluxon_status_string(d.status));
    cr_assert_eq(memcmp(s.buf + TUCX_SELF_LEN, s.buf + 4096, 8192), 0, "over UCX, byte-exact");
    cr_assert_str_eq(fx_ucx_peer_mech_name(mp), "am", "its endpoint was made");
    uint64_t xfers = 0, bytes = 0;
    fx_ucx_local_stats(s.u, &xfers, &bytes);
    cr_assert_eq(xfers, 1);
    fx_ucx_peer_close(mp);
    tucx_self_teardown(&s);
}


/* Issue 38: fx_ucx_copy_now copies a mapped peer's batch inside the call (a restore a get
 * waits for): no callback, nothing queued; a range past the mapping copies nothing
 * (INVALID_ARGUMENT), and a peer not mapped here, or a batch over FX_UCX_LOCAL_MAX_BYTES,
 * is left to fx_ucx_transfer (UNAVAILABLE, nothing copied). */
Test(ucx_local, copy_now_copies_a_mapped_peer_batch_in_the_call, .timeout = 60)
{
    tucx_self_t s;
    tucx_self_setup(&s, FX_UCX_MECH_AM);
    char *map = s.buf;
    fx_ucx_range_t g[2] = {{.local = s.buf + TUCX_SELF_LEN, .remote_offset = 4096, .len = 8192},
                           {.local = s.buf + TUCX_SELF_LEN + 16384, .remote_offset = 65536, .len = 100}};
    memset(s.buf + TUCX_SELF_LEN, 0, 32768);
    cr_assert_eq(fx_ucx_copy_now(s.u, s.p, FX_UCX_GET, g, 2), FLUXON_ERR_UNAVAILABLE, "not mapped here");
    cr_assert_neq(memcmp(s.buf + TUCX_SELF_LEN, map + 4096, 8192), 0, "nothing copied");
    fx_ucx_peer_set_local(s.p, map, TUCX_SELF_LEN);
    cr_assert_eq(fx_ucx_copy_now(s.u, s.p, FX_UCX_GET, g, 2), FLUXON_OK);
    cr_assert_eq(memcmp(s.buf + TUCX_SELF_LEN, map + 4096, 8192), 0, "copied in the call");
    cr_assert_eq(memcmp(s.buf + TUCX_SELF_LEN + 16384, map + 65536, 100), 0);
    cr_assert_not(fx_ucx_completions_queued(s.u), "no callback to run");
    tucx_fill(s.buf + TUCX_SELF_LEN, 4096, 9);
    fx_ucx_range_t p = {.local = s.buf + TUCX_SELF_LEN, .remote_offset = 200000, .len = 4096};
    cr_assert_eq(fx_ucx_copy_now(s.u, s.p, FX_UCX_PUT, &p, 1), FLUXON_OK);
    cr_assert_eq(memcmp(map + 200000, s.buf + TUCX_SELF_LEN, 4096), 0);
    uint64_t xfers = 0, bytes = 0;
    fx_ucx_local_stats(s.u, &xfers, &bytes);
    cr_assert_eq(xfers, 2);
    cr_assert_eq(bytes, 8192 + 100 + 4096);
    memset(s.buf + TUCX_SELF_LEN, 0, 16);
    fx_ucx_range_t past[2] = {{.local = s.buf + TUCX_SELF_LEN, .remote_offset = 0, .len = 16},
                              {.local = s.buf + TUCX_SELF_LEN + 64, .remote_offset = TUCX_SELF_LEN - 100, .len = 4096}};
    cr_assert_eq(fx_ucx_copy_now(s.u, s.p, FX_UCX_GET, past, 2), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_neq(memcmp(map, s.buf + TUCX_SELF_LEN, 16), 0, "a refused batch copies nothing, its good range neither");
    cr_assert_eq(fx_ucx_peer_status(s.p), FLUXON_OK, "not a peer failure");
    fx_ucx_range_t big = {.local = s.buf, .remote_offset = 0, .len = FX_UCX_LOCAL_MAX_BYTES + 1};
    cr_assert_eq(fx_ucx_copy_now(s.u, s.p, FX_UCX_GET, &big, 1), FLUXON_ERR_UNAVAILABLE, "too large: over UCX");
    cr_assert_eq(fx_ucx_copy_now(s.u, s.p, FX_UCX_GET, g, 0), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_ucx_copy_now(NULL, s.p, FX_UCX_GET, g, 1), FLUXON_ERR_INVALID_ARGUMENT);
    fx_ucx_local_stats(s.u, &xfers, &bytes);
    cr_assert_eq(xfers, 2, "refused batches are not counted");
    tucx_self_teardown(&s);
}
