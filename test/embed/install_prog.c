/* install_prog.c — a program built against an installed Fluxon (issue 8):
 *   cc prog.c $(PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig pkg-config --cflags --libs fluxon)
 * Checks the library's version against the installed header and starts and stops an
 * embedded master on a free loopback port. Exit status 0 on success. */
#include <stdio.h>
#include <string.h>

#include <fluxon.h>

int main(void)
{
    const char *v = fluxon_version();
    if (strcmp(v, FLUXON_VERSION_STRING) != 0) {
        fprintf(stderr, "install_prog: library %s, header %s\n", v, FLUXON_VERSION_STRING);
        return 1;
    }
    fluxon_node *master = NULL;
    int rc = fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"install\",\"listen\":\"127.0.0.1:0\","
                               "\"log_level\":\"warn\"}", &master);
    if (rc != FLUXON_OK) {
        fprintf(stderr, "install_prog: master start: %s\n", fluxon_status_string(rc));
        return 1;
    }
    unsigned port = fluxon_node_port(master);
    fluxon_node_stop(master);
    if (port == 0) {
        fprintf(stderr, "install_prog: master port 0\n");
        return 1;
    }
    printf("install_prog: fluxon %s, embedded master served on 127.0.0.1:%u\n", v, port);
    return 0;
}
