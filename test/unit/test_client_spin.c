/* test_client_spin.c — Criterion suite for the caller's spin on its ring slot (client/
 * ring.c, issue 18): by default 50 us after a call that found the owner polling, and
 * after one that rang the owner's doorbell only on hosts with 8 or more CPUs (on fewer a
 * spinning caller takes the core the woken owner needs); FLUXON_RING_SPIN_US sets both,
 * and a value that is not an integer in 0..1000000 is ignored (warned): the defaults. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <unistd.h>

#include "client.h"

static void spin_with(const char *env, uint64_t *polled, uint64_t *parked)
{
    if (env) cr_assert_eq(setenv("FLUXON_RING_SPIN_US", env, 1), 0);
    else cr_assert_eq(unsetenv("FLUXON_RING_SPIN_US"), 0);
    *polled = *parked = 12345;
    fx_client_ring_spin_us(polled, parked);
}

Test(client_spin, by_default_a_small_host_spins_only_when_the_owner_polls)
{
    uint64_t polled, parked;
    spin_with(NULL, &polled, &parked);
    cr_assert_eq(polled, 50);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_eq(parked, cpus >= 8 ? 50u : 0u, "%ld CPUs: %llu", cpus, (unsigned long long)parked);
    spin_with("", &polled, &parked);
    cr_assert_eq(polled, 50, "an empty value is unset");
}

Test(client_spin, the_environment_sets_both)
{
    uint64_t polled, parked;
    spin_with("20", &polled, &parked);
    cr_assert(polled == 20 && parked == 20);
    spin_with("0", &polled, &parked);
    cr_assert(polled == 0 && parked == 0);
    spin_with("1000000", &polled, &parked);
    cr_assert(polled == 1000000 && parked == 1000000);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *bad[] = {"1000001", "-1", "20us", "x", " 20", "+20", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        spin_with(bad[i], &polled, &parked);
        cr_assert(polled == 50 && parked == (cpus >= 8 ? 50u : 0u), "FLUXON_RING_SPIN_US=%s: the defaults", bad[i]);
    }
}
