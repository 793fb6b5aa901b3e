/* status.c — fluxon_status_string, fluxon_version and the calling thread's last-error
 * message (fluxon_last_error_message: set by the client's calls and the embedded nodes'
 * starts alike). */
#include <stdarg.h>
#include <stdio.h>

#include "fx.h"

static __thread char fx_last_msg[512];

const char *fluxon_last_error_message(void) { return fx_last_msg; }

FX_INTERNAL void fx_last_msg_clear(void) { fx_last_msg[0] = 0; }

FX_INTERNAL void fx_last_msg_vset(const char *fmt, va_list ap) { vsnprintf(fx_last_msg, sizeof fx_last_msg, fmt, ap); }

const char *fluxon_status_string(int status)
{
    switch (status) {
#define FX_STATUS_CASE(s) case s: return #s;
    FX_STATUS_CASE(FLUXON_OK)
    FX_STATUS_CASE(FLUXON_IN_PROGRESS)
    FX_STATUS_CASE(FLUXON_PIN_REFUSED)
    FX_STATUS_CASE(FLUXON_ERR_INVALID_ARGUMENT)
    FX_STATUS_CASE(FLUXON_ERR_NOT_FOUND)
    FX_STATUS_CASE(FLUXON_ERR_KEY_BEING_WRITTEN)
    FX_STATUS_CASE(FLUXON_ERR_KEY_EXISTS)
    FX_STATUS_CASE(FLUXON_ERR_GROUP_REJECTED)
    FX_STATUS_CASE(FLUXON_ERR_NO_SPACE)
    FX_STATUS_CASE(FLUXON_ERR_TIMEOUT)
    FX_STATUS_CASE(FLUXON_ERR_STALE)
    FX_STATUS_CASE(FLUXON_ERR_BUSY)
    FX_STATUS_CASE(FLUXON_ERR_UNAVAILABLE)
    FX_STATUS_CASE(FLUXON_ERR_PROTOCOL)
    FX_STATUS_CASE(FLUXON_ERR_AUTH)
    FX_STATUS_CASE(FLUXON_ERR_WRONG_HANDLE)
    FX_STATUS_CASE(FLUXON_ERR_CANCELLED)
    FX_STATUS_CASE(FLUXON_ERR_LEASE_EXPIRED)
    FX_STATUS_CASE(FLUXON_ERR_CONFIG)
    FX_STATUS_CASE(FLUXON_ERR_NOMEM)
    FX_STATUS_CASE(FLUXON_ERR_INTERNAL)
    FX_STATUS_CASE(FLUXON_ERR_UNKNOWN_OUTCOME)
#undef FX_STATUS_CASE
    default: return "FLUXON_ERR_UNKNOWN";
    }
}

const char *fluxon_version(void) { return FLUXON_VERSION_STRING; }
