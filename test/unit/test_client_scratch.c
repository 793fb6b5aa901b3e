/* test_client_scratch.c — Criterion suite for client/scratch.c, the calling thread's
 * request and response buffers and decode arena (issue 18): kept from call to call, lent
 * to one user at a time (a nested user gets the heap), large buffers from the heap, a
 * body that outlives the call copied out, each thread its own, freed at thread exit
 * (make asan checks that no thread's scratch leaks). */
#include <criterion/criterion.h>
#include <pthread.h>

#include "client.h"

Test(client_scratch, a_buffer_is_kept_and_lent_to_one_user_at_a_time)
{
    uint8_t *a = fx_client_buf(FX_CLIENT_REQ, 100);
    cr_assert_not_null(a);
    memset(a, 1, 100);
    uint8_t *nested = fx_client_buf(FX_CLIENT_REQ, 100); /* lent: the heap */
    cr_assert_not_null(nested);
    cr_assert_neq(nested, a);
    memset(nested, 2, 100);
    cr_assert_eq(a[99], 1, "the nested user wrote into the lent buffer");
    fx_client_buf_free(nested);
    fx_client_buf_free(a);
    cr_assert_eq(fx_client_buf(FX_CLIENT_REQ, 200), a, "the buffer is kept for the next call");
    uint8_t *r = fx_client_buf(FX_CLIENT_RESP, 200); /* the response buffer is another one */
    cr_assert_neq(r, a);
    fx_client_buf_free(r);
    fx_client_buf_free(a);
    fx_client_buf_free(NULL);
}

Test(client_scratch, growth_keeps_it_and_large_buffers_come_from_the_heap)
{
    uint8_t *a = fx_client_buf(FX_CLIENT_RESP, 16);
    fx_client_buf_free(a);
    uint8_t *b = fx_client_buf(FX_CLIENT_RESP, 40000); /* grown */
    memset(b, 3, 40000);
    fx_client_buf_free(b);
    cr_assert_eq(fx_client_buf(FX_CLIENT_RESP, 40000), b);
    fx_client_buf_free(b);
    uint8_t *big = fx_client_buf(FX_CLIENT_RESP, 1u << 20); /* over 64 KiB: heap, not kept */
    cr_assert_not_null(big);
    memset(big, 4, 1u << 20);
    fx_client_buf_free(big);
    cr_assert_eq(fx_client_buf(FX_CLIENT_RESP, 10), b, "a large request does not replace the kept buffer");
    fx_client_buf_free(b);
}

Test(client_scratch, a_body_that_outlives_the_call_is_copied_out)
{
    uint8_t *a = fx_client_buf(FX_CLIENT_REQ, 64);
    for (int i = 0; i < 64; i++) a[i] = (uint8_t)i;
    uint8_t *own = fx_client_buf_own(a, 64);
    cr_assert_not_null(own);
    cr_assert_neq(own, a);
    for (int i = 0; i < 64; i++) cr_assert_eq(own[i], i);
    cr_assert_eq(fx_client_buf(FX_CLIENT_REQ, 64), a, "the scratch was given back by the copy");
    fx_client_buf_free(a);
    uint8_t *heap = fx_malloc(8);
    cr_assert_eq(fx_client_buf_own(heap, 8), heap, "heap memory is already owned");
    fx_client_buf_free(heap); /* not lent: freed */
    fx_free(own);
}

Test(client_scratch, the_decode_arena_is_lent_once_and_reset_when_given_back)
{
    fx_arena_t l1, l2;
    fx_arena_t *a = fx_client_arena(&l1);
    cr_assert_neq(a, &l1);
    cr_assert_not_null(fx_arena_alloc(a, 100));
    fx_arena_t *b = fx_client_arena(&l2); /* nested: the caller's own */
    cr_assert_eq(b, &l2);
    cr_assert_not_null(fx_arena_alloc(b, 100));
    fx_client_arena_done(b);
    fx_client_arena_done(a);
    cr_assert_eq(fx_client_arena(&l1), a);
    cr_assert_eq(a->used, 0, "given back reset");
    fx_client_arena_done(a);
}

static void *th_use(void *arg)
{
    uint8_t **out = arg;
    uint8_t *p = fx_client_buf(FX_CLIENT_REQ, 1000);
    memset(p, 5, 1000);
    *out = p;
    fx_client_buf_free(p);
    fx_arena_t l, *a = fx_client_arena(&l);
    fx_arena_alloc(a, 5000);
    fx_client_arena_done(a);
    return NULL;
}

Test(client_scratch, each_thread_has_its_own_and_it_goes_with_the_thread)
{
    uint8_t *mine = fx_client_buf(FX_CLIENT_REQ, 1000);
    for (int round = 0; round < 8; round++) {
        pthread_t t;
        uint8_t *theirs = NULL;
        cr_assert_eq(pthread_create(&t, NULL, th_use, &theirs), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert_not_null(theirs);
        cr_assert_neq(theirs, mine, "another thread got this thread's lent buffer");
    }
    fx_client_buf_free(mine);
}

Test(client_scratch, a_zero_byte_buffer_is_lent_and_given_back_like_any_other)
{
    uint8_t *z = fx_client_buf(FX_CLIENT_RESP, 0); /* never NULL: NULL would mean NOMEM and stay lent */
    cr_assert_not_null(z);
    fx_client_buf_free(z);
    uint8_t *a = fx_client_buf(FX_CLIENT_RESP, 10);
    cr_assert_eq(a, z, "the buffer was not given back");
    fx_client_buf_free(a);
}
