/* test_etcd.c — the etcd client (transport/etcd.c) without an etcd: when every endpoint of
 * "ha.etcd" fails, the error names each of them, not only the last one tried (a new user
 * saw only the first endpoint named). The endpoints are loopback ports this test holds
 * bound and not listening: a connect there is refused at once. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "etcd.h"
#include "fluxon.h"

static int tetcd_port(int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(*fd, 0);
    cr_assert_eq(bind(*fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(*fd, (struct sockaddr *)&a, &l), 0);
    return ntohs(a.sin_port);
}

Test(etcd, every_failed_endpoint_is_named, .timeout = 30)
{
    int f1, f2;
    int p1 = tetcd_port(&f1), p2 = tetcd_port(&f2);
    char eps[128], err[512], want1[32], want2[32];
    snprintf(eps, sizeof eps, "http://127.0.0.1:%d,http://127.0.0.1:%d", p1, p2);
    fx_etcd_t *e = NULL;
    cr_assert_eq(fx_etcd_new(eps, &e), FLUXON_OK);
    int64_t id = 0;
    uint32_t granted = 0;
    cr_assert_eq(fx_etcd_lease_grant(e, 5, 1000, &id, &granted, err, sizeof err), FLUXON_ERR_UNAVAILABLE);
    snprintf(want1, sizeof want1, "127.0.0.1:%d", p1);
    snprintf(want2, sizeof want2, "127.0.0.1:%d", p2);
    cr_assert(strstr(err, want1) && strstr(err, want2), "both endpoints named: %s", err);
    char small[24]; /* a short buffer is cut, never overrun */
    cr_assert_eq(fx_etcd_lease_grant(e, 5, 1000, &id, &granted, small, sizeof small), FLUXON_ERR_UNAVAILABLE);
    cr_assert_lt(strlen(small), sizeof small);
    fx_etcd_free(e);
    close(f1);
    close(f2);
}
