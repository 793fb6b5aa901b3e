/* test_grant_ceiling.c — a GPU owner whose grants the master cannot renew: the values the
 * master placed in its segment for other owners' puts (up to half of it, master/place.c)
 * plus its grants fill the segment.
 *  - Pins leave room there: the pin budget is a share of the room the placed values leave
 *    the owner's grants (not of a hot tier that counts grants it can never have), so puts
 *    go on, evicting unpinned values; the old budget let pins take every slot, and the next
 *    put waited to 9/10 of the client's timeout, then answered FLUXON_ERR_NO_SPACE.
 *  - With every slot held by readers, a put or a get that needs a slot there answers
 *    FLUXON_ERR_NO_SPACE within the owner's own bound (about a second with nothing
 *    evictable, OEV_STUCK_MS; a GRANT refused is asked again each second), not at 9/10 of
 *    the client's timeout, and the owner's log names what holds the segment: the placed
 *    values, their limit and node_role, its grants, the reader pins.
 *  - A claim waiting for a GRANT the master is slow to answer ends at its deadline too.
 * A process cluster (restartfix.h): owner 0 is the GPU owner A (64 MiB, 4 MiB grants: 16 at
 * most, 6 of them in its grant-only lower half), owner 1 a remote_cache owner C whose
 * client's write_through puts the master places on A (32 MiB: A keeps room for 8 grants). */
#include <criterion/criterion.h>
#include <string.h>

#include "restartfix.h"

#define GC_VAL (256u * 1024u) /* one 256 KiB slot */
#define GC_MIB (1024ll * 1024ll)

TestSuite(grant_ceiling, .fini = rf_down, .timeout = 180);

/* placed_bytes of owner node_id in the master's node table (-1: not listed) */
static long long gc_placed(fluxon_client *c, const char *node_id)
{
    static char buf[1 << 14];
    size_t len = 0;
    cr_assert_eq(fluxon_client_cluster_nodes(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf), *n;
    cr_assert_not_null(doc);
    long long r = -1;
    cJSON_ArrayForEach(n, doc)
    {
        cJSON *id = cJSON_GetObjectItem(n, "node_id");
        if (cJSON_IsString(id) && !strcmp(id->valuestring, node_id))
            r = (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(n, "placed_bytes"));
    }
    cJSON_Delete(doc);
    return r;
}

/* A batch of n values pfx/from.. through c (opts may be NULL); per-key statuses in st. */
static int gc_put(fluxon_client *c, const char *pfx, int from, int n, const fluxon_put_options *opts, int *st)
{
    static uint8_t v[16][GC_VAL];
    char names[16][48];
    const char *keys[16];
    const void *src[16];
    uint64_t lens[16];
    cr_assert_leq(n, 16);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%s/%d", pfx, from + i);
        keys[i] = names[i];
        th_pattern(v[i], NULL, GC_VAL, (uint64_t)(from + i) * 7 + (uint64_t)pfx[0]);
        src[i] = v[i];
        lens[i] = GC_VAL;
    }
    return fluxon_batch_put_from(c, keys, (size_t)n, src, lens, opts, st);
}

/* Whether one line of owner i's log holds every needle (NULL-terminated), within timeout_ms. */
static int gc_log_line(int i, const char *const *needles, int timeout_ms)
{
    char path[400];
    snprintf(path, sizeof path, "%s/owner%d.log", rf.dir, i);
    double end = th_now_s() + th_wait_bound_s(timeout_ms);
    do {
        FILE *f = fopen(path, "r");
        static char line[8192];
        int found = 0;
        while (f && !found && fgets(line, sizeof line, f)) {
            found = 1;
            for (int k = 0; needles[k] && found; k++) found = strstr(line, needles[k]) != NULL;
        }
        if (f) fclose(f);
        if (found) return 1;
        th_sleep_ms(20);
    } while (th_now_s() < end);
    return 0;
}

static void gc_up_ex(const char *a_extra, int ext_timeout_ms)
{
    snprintf(rf_segment, sizeof rf_segment, "64MiB");
    snprintf(rf_grant, sizeof rf_grant, "4MiB");
    rf_ext_timeout_ms = ext_timeout_ms; /* a claim's own deadline is 9/10 of it */
    const char *extra[2] = {a_extra, ",\"node_role\":\"remote_cache\",\"log_level\":\"info\""};
    rf_up(2, extra);
}

static void gc_up(const char *a_extra) { gc_up_ex(a_extra, 20000); } /* claims' deadline: 18 s */

/* C's client writes through to A until the master places no more there (half A's segment) */
static void gc_fill_placed(fluxon_client *c)
{
    fluxon_put_options wt = {.field_mask = FLUXON_PUT_OPT_WRITE_THROUGH, .write_through = 1};
    int st[16];
    long long placed = 0;
    for (int b = 0; b < 12 && placed < 32 * GC_MIB; b++) { /* 12 batches of 4 MiB: 48 MiB at most */
        cr_assert_eq(gc_put(c, "placed", b * 16, 16, &wt, st), FLUXON_OK);
        for (int i = 0; i < 16; i++) cr_assert_eq(st[i], FLUXON_OK, "placed/%d: %s", b * 16 + i, fluxon_status_string(st[i]));
        placed = gc_placed(c, "o0");
    }
    cr_assert_eq(placed, 32 * GC_MIB, "the master placed half of A's segment there: %lld", placed);
}

/* a value only C holds: A's client writes it through (A keeps no copy) */
static void gc_put_on_c(fluxon_client *a)
{
    fluxon_put_options wt = {.field_mask = FLUXON_PUT_OPT_WRITE_THROUGH, .write_through = 1};
    int st = 0;
    cr_assert_eq(gc_put(a, "onc", 0, 1, &wt, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_OK);
    cr_assert_eq(gc_placed(a, "o1"), (long long)GC_VAL, "placed on C");
}

/* A's 8 grants hold 128 values of 256 KiB. The old pin budget, half the hot tier of all 16
 * grants (64 MiB with hot_capacity_ratio 1; the default 0.95 leaves 1.6 MiB unpinned, which
 * a few readers or writes in flight take as well), let pins take all of them; now it is
 * half of the 32 MiB the placed values leave: 64 values pinned, the others stored unpinned,
 * and 16 puts more than the grants hold still succeed (evicting unpinned values) at once.
 * The old code answered the 129th put NO_SPACE at its claim's deadline, 18 s. */
Test(grant_ceiling, pins_leave_room_on_an_owner_the_master_placed_half_of)
{
    gc_up(",\"writeback_watermark\":0.9,\"hot_capacity_ratio\":1.0"); /* as reported: write-back on */
    fluxon_client *a = rf_client(0), *c = rf_client(1);
    gc_fill_placed(c);
    gc_put_on_c(a);
    fluxon_put_options pin = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = 600000};
    int pinned = 0, refused = 0;
    double worst = 0;
    for (int i = 0; i < 144; i++) {
        int st = 0;
        double t0 = th_now_s();
        int rc = gc_put(a, "pinned", i, 1, &pin, &st);
        double dt = th_now_s() - t0;
        worst = dt > worst ? dt : worst;
        cr_assert_eq(rc, FLUXON_OK, "put %d: %s after %.2f s", i, fluxon_status_string(rc), dt);
        cr_assert(st == FLUXON_OK || st == FLUXON_PIN_REFUSED, "put %d: %s after %.2f s (%d pinned)", i,
                  fluxon_status_string(st), dt, pinned);
        pinned += st == FLUXON_OK;
        refused += st == FLUXON_PIN_REFUSED;
    }
    fprintf(stderr, "144 pinned puts: %d pinned, %d stored unpinned, slowest %.2f s\n", pinned, refused, worst);
    cr_assert_eq(pinned, 64, "half of the 32 MiB A's grants can have: %d pinned", pinned);
    cr_assert_lt(worst, 4.0, "no put waited for room: %.2f s", worst);
    cr_assert_eq(rf_stat(a, false, "pin_budget_bytes"), 16 * GC_MIB);
    /* a get of a value only C holds gets a slot on A for its copy the same way */
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(a, "onc/0", &h), FLUXON_OK);
    cr_assert(th_pattern(NULL, fluxon_holder_data(h), GC_VAL, (uint64_t)'o'), "onc/0 byte-exact");
    fluxon_holder_release(h);
    const char *const why[] = {"pin refused (stored unpinned)", "of the 33554432 bytes that the 33554432 bytes the "
                               "master placed in this segment for other owners' puts leave its grants", NULL};
    cr_assert(gc_log_line(0, why, 5000), "A's log says why the pin budget is smaller (%s/owner0.log)", rf.dir);
    fluxon_client_close(a);
    fluxon_client_close(c);
}

/* A's client fills A's 8 grants (128 values) and holds every value (a reader): nothing is
 * evictable. The old code answered a put and a get at their claims' deadline, 18 s of the
 * client's 20 s; now within the owner's bound. */
static void gc_held(const char *a_extra)
{
    gc_up(a_extra);
    fluxon_client *a = rf_client(0), *c = rf_client(1);
    gc_fill_placed(c);
    gc_put_on_c(a);
    fluxon_put_options lf = {.field_mask = FLUXON_PUT_OPT_LOCAL_FIRST, .local_first = 1};
    static fluxon_holder *held[128];
    char key[48];
    for (int i = 0; i < 128; i++) {
        int st = 0;
        cr_assert_eq(gc_put(a, "held", i, 1, &lf, &st), FLUXON_OK);
        cr_assert_eq(st, FLUXON_OK, "held/%d: %s", i, fluxon_status_string(st));
    }
    for (int i = 0; i < 128; i++) {
        snprintf(key, sizeof key, "held/%d", i);
        cr_assert_eq(fluxon_get(a, key, &held[i]), FLUXON_OK, "%s still on A", key);
    }
    int st = 0;
    double t0 = th_now_s();
    int rc = gc_put(a, "more", 0, 1, &lf, &st);
    double took = th_now_s() - t0;
    fluxon_holder *h = NULL;
    t0 = th_now_s();
    int grc = fluxon_get(a, "onc/0", &h);
    double got = th_now_s() - t0;
    fprintf(stderr, "write-back %s: every slot held; a put answered %s in %.2f s, a get %s in %.2f s\n",
            a_extra ? "on" : "off", fluxon_status_string(rc == FLUXON_OK ? st : rc), took, fluxon_status_string(grc),
            got);
    /* the owner's bound: nothing evictable for OEV_STUCK_MS (1 s), seen at the next GRANT
     * refused (one a second) */
    cr_assert_lt(took, 4.0, "the put answered within the owner's bound, not at 9/10 of the client's 20 s: %.2f s "
                 "(the get: %.2f s)", took, got);
    cr_assert_eq(rc, FLUXON_OK);
    cr_assert_eq(st, FLUXON_ERR_NO_SPACE, "every slot of A is held: %s", fluxon_status_string(st));
    cr_assert_lt(got, 4.0, "the get answered within the owner's bound: %.2f s", got);
    cr_assert_eq(grc, FLUXON_ERR_NO_SPACE, "no slot on A for the copy: %s", fluxon_status_string(grc));
    /* the owner's NO_SPACE names what holds its segment: the master's placed values (their
     * bytes, their limit, node_role), its grants, and the readers holding every value */
    const char *const why[] = {"no space for 1 slots of 262144 bytes: nothing was evictable", "grants 8/16",
                               "33554432 bytes hold values the master placed for other owners' puts (limit: half the "
                               "segment, node_role gpu_owner), 33554432 its 8 grants",
                               "held: 128 reader pins", NULL};
    cr_assert(gc_log_line(0, why, 5000), "A's log names the placed values, its grants and the readers (%s/owner0.log)",
              rf.dir);
    for (int i = 0; i < 128; i++) fluxon_holder_release(held[i]);
    fluxon_client_close(a);
    fluxon_client_close(c);
}

Test(grant_ceiling, a_put_and_a_get_on_an_owner_whose_every_slot_is_held_answer_within_its_bound)
{
    gc_held(",\"writeback_watermark\":0.9");
}

/* the same without write-back: the wait never depended on it */
Test(grant_ceiling, the_same_without_write_back)
{
    gc_held(NULL);
}

/* A claim waiting for a GRANT ends at its deadline too: A's master answers GRANT 10 s late
 * (test fault), past A's master_timeout_ms (3 s). A put from a client whose timeout_ms is
 * 2.5 s answers NO_SPACE at its claim's deadline, 2.25 s; the old code ended the claim only
 * with the GRANT's timeout, 3 s, and the client had given up (FLUXON_ERR_TIMEOUT at 2.5 s). */
Test(grant_ceiling, a_claim_waiting_for_a_grant_ends_before_its_caller_gives_up)
{
    gc_up_ex(",\"test\":{\"fault_message\":\"GRANT\",\"fault\":\"delay\",\"fault_ms\":10000,\"fault_count\":0}",
             2500);
    fluxon_client *a = rf_client(0);
    fluxon_put_options lf = {.field_mask = FLUXON_PUT_OPT_LOCAL_FIRST, .local_first = 1};
    int st = 0;
    double t0 = th_now_s();
    int rc = gc_put(a, "first", 0, 1, &lf, &st);
    double took = th_now_s() - t0;
    fprintf(stderr, "a put waiting for a GRANT answered %s/%s in %.2f s\n", fluxon_status_string(rc),
            fluxon_status_string(st), took);
    cr_assert_eq(rc, FLUXON_OK, "the owner answered before the client's 2.5 s: %s after %.2f s",
                 fluxon_status_string(rc), took);
    cr_assert_eq(st, FLUXON_ERR_NO_SPACE, "%s", fluxon_status_string(st));
    cr_assert_lt(took, 2.5, "%.2f s", took);
    fluxon_client_close(a);
}
