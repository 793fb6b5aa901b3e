/* test_prefault.c — Criterion suite for transport/prefault.c: the thread faults a real
 * memfd mapping in without changing a byte, reads every page exactly when its probe says a
 * mapped page's first access costs (or when the test lowers the threshold), stops part way
 * through a pass when asked, and the touch pass itself counts its pages and honours the
 * stop flag; the heap reserve (common/heap.c) is made once per process, a new thread's heap
 * grows into it, and the thread faults it in without changing a byte. Every wait is bounded. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prefault.h"

#define TPF_MIB (1024u * 1024u)
#define TPF_WAIT_MS 20000
#define TPF_TEST_TIMEOUT_S 60

static void *tpf_map(int fd, size_t len)
{
    cr_assert_eq(ftruncate(fd, (off_t)len), 0);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(p, MAP_FAILED);
    return p;
}

static uint64_t tpf_sum(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Waits (bounded) until the thread has ended; true when it did. */
static bool tpf_wait_done(fx_prefault_t *pf)
{
    uint64_t deadline = fx_now_ns() + (uint64_t)TPF_WAIT_MS * 1000000ull;
    while (fx_prefault_running(pf) && fx_now_ns() < deadline) usleep(2000);
    return !fx_prefault_running(pf);
}

/* One run over a 24 MiB memfd mapped twice (the "owner's" mapping written, holes left):
 * nothing changes, and the touch pass runs exactly when the probe reaches the threshold. */
static void tpf_run(int touch, uint64_t touch_probe_ns)
{
    size_t len = 24 * TPF_MIB;
    int fd = memfd_create("tpf", MFD_CLOEXEC);
    cr_assert_geq(fd, 0);
    uint8_t *writer = tpf_map(fd, len); /* another mapping of the same memfd: the owner's */
    for (size_t i = 0; i < len; i += 4096) /* every page different; some left as holes */
        if ((i / 4096) % 3) memset(writer + i, (int)(i / 4096 * 7 + 1), 4096);
    uint64_t before = tpf_sum(writer, len);
    uint8_t *reader = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(reader, MAP_FAILED);

    fx_prefault_t pf = {.touch = touch, .touch_probe_ns = touch_probe_ns};
    fx_prefault_start(&pf, reader, len, 4096, fd, "external", "tpf");
    cr_assert(pf.running, "the thread starts");
    cr_assert(tpf_wait_done(&pf), "the prefault of 24 MiB ends within %d ms", TPF_WAIT_MS);
    fx_prefault_stop(&pf);
    cr_assert_not(pf.running);
    cr_assert_not(fx_prefault_running(&pf));
    uint64_t threshold = touch_probe_ns ? touch_probe_ns : FX_PREFAULT_TOUCH_PROBE_NS;
    if (touch != FX_TOUCH_AUTO) {
        cr_assert_eq(pf.probe_ns, 0, "segment_touch %d: no probe", touch);
        cr_assert_eq(pf.touched_pages, touch == FX_TOUCH_ON ? len / 4096 : 0, "segment_touch %d", touch);
    } else {
        cr_assert_gt(pf.probe_ns, 0, "the mapping was probed");
        if (pf.probe_ns >= threshold)
            cr_assert_eq(pf.touched_pages, len / 4096, "probe %llu ns: every page read once",
                         (unsigned long long)pf.probe_ns);
        else
            cr_assert_eq(pf.touched_pages, 0, "probe %llu ns: no page read", (unsigned long long)pf.probe_ns);
    }
    cr_assert_eq(tpf_sum(writer, len), before, "not a byte changed");
    cr_assert_eq(tpf_sum(reader, len), before);
    fx_prefault_stop(&pf); /* again: a no-op */
    munmap(reader, len);
    munmap(writer, len);
    close(fd);
}

Test(prefault, maps_a_segment_without_changing_a_byte_and_reads_every_page_when_the_probe_says_so,
     .timeout = TPF_TEST_TIMEOUT_S)
{
    tpf_run(FX_TOUCH_AUTO, 0); /* this host's own verdict */
    tpf_run(FX_TOUCH_AUTO, 1); /* a threshold every probe reaches: the touch pass runs on any host */
    tpf_run(FX_TOUCH_ON, 0);   /* segment_touch "on": every page read, no probe */
    tpf_run(FX_TOUCH_OFF, 1);  /* "off": none, whatever a probe would say */
}

/* Starts a prefault of a 512 MiB memfd (sparse: only what the thread reaches is allocated)
 * and stops it once it has covered part of pass `pass`; the pass must end short of the
 * whole mapping. */
static void tpf_stop_in_pass(int pass)
{
    size_t len = 512 * TPF_MIB;
    int fd = memfd_create("tpf-stop", MFD_CLOEXEC);
    cr_assert_geq(fd, 0);
    uint8_t *p = tpf_map(fd, len);
    fx_prefault_t pf = {.touch_probe_ns = 1}; /* the touch pass runs on any host */
    fx_prefault_start(&pf, p, len, 4096, -1, "owner", NULL);
    cr_assert(pf.running);
    uint64_t deadline = fx_now_ns() + (uint64_t)TPF_WAIT_MS * 1000000ull;
    while (fx_prefault_running(&pf) && fx_now_ns() < deadline &&
           !(__atomic_load_n(&pf.pass, __ATOMIC_RELAXED) == pass && __atomic_load_n(&pf.progress, __ATOMIC_RELAXED) > 0))
        usleep(200);
    cr_assert(fx_prefault_running(&pf), "the thread was still in pass %d when asked to stop", pass);
    uint64_t t0 = fx_now_ns();
    fx_prefault_stop(&pf);
    uint64_t ms = (fx_now_ns() - t0) / 1000000u;
    cr_assert_not(pf.running);
    cr_assert_not(fx_prefault_running(&pf));
    cr_assert_eq(pf.pass, pass, "it stopped in pass %d, not %d", pf.pass, pass);
    cr_assert_lt(pf.progress, len, "pass %d stopped part way (%llu of %zu bytes)", pass,
                 (unsigned long long)pf.progress, len);
    cr_assert_lt(ms, 5000, "stopped after %llu ms", (unsigned long long)ms);
    if (pass == 3) cr_assert_lt(pf.touched_pages, len / 4096);
    munmap(p, len);
    close(fd);
}

Test(prefault, stops_part_way_through_the_mapping_pass_when_asked, .timeout = TPF_TEST_TIMEOUT_S)
{
    tpf_stop_in_pass(2);
}

Test(prefault, stops_part_way_through_the_touch_pass_when_asked, .timeout = TPF_TEST_TIMEOUT_S)
{
    tpf_stop_in_pass(3);
}

Test(prefault, the_touch_pass_reads_every_page_and_honours_its_stop_flag, .timeout = TPF_TEST_TIMEOUT_S)
{
    size_t len = 4 * TPF_MIB + 4096 + 100; /* a partial page at the end is not a page */
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    memset(p, 0x5a, len);
    int stop = 0;
    uint64_t progress = 0;
    cr_assert_eq(fx_prefault_touch(p, len, 4096, &stop, &progress), (4 * TPF_MIB + 4096) / 4096);
    cr_assert_eq(progress, 4 * TPF_MIB + 4096, "progress: every whole page");
    cr_assert_eq(fx_prefault_touch(p, len, 4096, NULL, NULL), (4 * TPF_MIB + 4096) / 4096);
    cr_assert_eq(fx_prefault_touch(p, len, 2u << 20, NULL, NULL), 2, "2 MiB pages: two whole ones");
    stop = 1;
    cr_assert_eq(fx_prefault_touch(p, len, 4096, &stop, &progress), 0, "a set stop flag reads nothing");
    cr_assert_eq(progress, 0);
    cr_assert_eq(fx_prefault_touch(p, 100, 4096, NULL, NULL), 0, "less than a page");
    cr_assert_eq(fx_prefault_touch(p, len, 0, NULL, NULL), 0, "no page size: nothing");
    for (size_t i = 0; i < len; i++) cr_assert_eq(p[i], 0x5a);
    cr_assert_gt(fx_prefault_probe_ns(p, len, 4096, 8), 0);
    cr_assert_eq(fx_prefault_probe_ns(p, len, 4096, 0), 0, "no page asked: 0");
    cr_assert_eq(fx_prefault_probe_ns(p, 100, 4096, 4), 0, "no whole page: 0");
    munmap(p, len);
}

static void *tpf_alloc_thread(void *arg)
{
    (void)arg;
    uint8_t *p = fx_malloc(TPF_MIB);
    if (p) memset(p, 0x5a, TPF_MIB);
    return p;
}

/* Criterion runs each test in a process of its own: this one makes the process's reserve. */
Test(prefault, the_heap_reserve_is_made_once_and_new_threads_grow_into_it, .timeout = TPF_TEST_TIMEOUT_S)
{
    uint64_t len = 1;
    cr_assert_null(fx_heap_reserve(0, &len), "0 MiB: no reserve");
    cr_assert_eq(len, 0);
    uint8_t *base = fx_heap_reserve(40 * TPF_MIB, &len);
#ifdef FX_USE_LIBC_MALLOC
    cr_assert_null(base, "the sanitizer build allocates with libc: no reserve");
    cr_assert_eq(len, 0);
#else
    cr_assert_not_null(base);
    cr_assert_eq(len, 64 * TPF_MIB, "rounded up to 64 MiB: %llu", (unsigned long long)len);
    cr_assert_eq((uintptr_t)base % (64 * TPF_MIB), 0, "aligned as mimalloc places its segments");
    uint64_t len2 = 1;
    cr_assert_null(fx_heap_reserve(64 * TPF_MIB, &len2), "once per process");
    cr_assert_eq(len2, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, tpf_alloc_thread, NULL), 0);
    void *p = NULL;
    cr_assert_eq(pthread_join(t, &p), 0);
    cr_assert_not_null(p);
    cr_assert((uint8_t *)p >= base && (uint8_t *)p + TPF_MIB <= base + len,
              "a new thread's 1 MiB came from the reserve [%p, %p): %p", (void *)base, (void *)(base + len), p);
    uint64_t before = tpf_sum(p, TPF_MIB);
    fx_prefault_t pf = {.touch = FX_TOUCH_ON, .heap_base = base, .heap_len = len};
    fx_prefault_start(&pf, NULL, 0, 4096, -1, "owner", "tpf");
    cr_assert(pf.running, "the thread starts");
    cr_assert(tpf_wait_done(&pf), "the heap prefault of 64 MiB ends within %d ms", TPF_WAIT_MS);
    fx_prefault_stop(&pf);
    cr_assert_eq(pf.heap_touched_pages, len / 4096, "every page of the reserve read once");
    cr_assert_eq(pf.touched_pages, 0, "no segment");
    cr_assert_eq(tpf_sum(p, TPF_MIB), before, "the live allocation kept every byte");
    fx_free(p);
#endif
}
