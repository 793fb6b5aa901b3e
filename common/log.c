/* log.c — see log.h. One fprintf per line so lines from several threads never mix. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/time.h>

static int g_log_level = -1; /* unset: info until the first node or client sets it */
static __thread char t_role[16] = "proc";
static __thread char t_node[64] = "-";
static __thread char t_last_error[512]; /* this thread's last ERROR line, logged or not */

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

FX_INTERNAL int fx_log_level_parse(const char *s)
{
    for (int i = 0; i < (int)FX_ARRAY_LEN(level_names); i++)
        if (s && strcasecmp(s, level_names[i]) == 0) return i;
    return -1;
}

FX_INTERNAL const char *fx_log_level_name(int level)
{
    return level >= 0 && level < (int)FX_ARRAY_LEN(level_names) ? level_names[level] : "?";
}

FX_INTERNAL void fx_log_set_level(int level) { __atomic_store_n(&g_log_level, level, __ATOMIC_RELAXED); }
FX_INTERNAL int fx_log_get_level(void)
{
    int l = __atomic_load_n(&g_log_level, __ATOMIC_RELAXED);
    return l < 0 ? FX_LOG_INFO : l;
}
FX_INTERNAL void fx_log_apply_config_level(int level, bool given)
{
    int cur = __atomic_load_n(&g_log_level, __ATOMIC_RELAXED);
    /* a config without log_level keeps a level already set (a client opened without one
     * brought back the INFO lines of nodes started with "off": a new user's finding) */
    if (cur < 0 || (given && level < cur)) fx_log_set_level(level);
}

FX_INTERNAL void fx_log_set_context(const char *role, const char *node_id)
{
    fx_strlcpy(t_role, role ? role : "proc", sizeof t_role);
    fx_strlcpy(t_node, node_id ? node_id : "-", sizeof t_node);
}

FX_INTERNAL const char *fx_log_last_error(void) { return t_last_error; }
FX_INTERNAL void fx_log_last_error_clear(void) { t_last_error[0] = 0; }

FX_INTERNAL void fx_log(int level, const char *fmt, ...)
{
    bool shown = level >= fx_log_get_level();
    if (!shown && level != FX_LOG_ERROR) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (level == FX_LOG_ERROR) fx_strlcpy(t_last_error, msg, sizeof t_last_error);
    if (!shown) return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    static const char *const tags[] = {"DEBUG", "INFO ", "WARN ", "ERROR", "OFF  "};
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ %s %s[%s] %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec,
            tags[level < 0 ? 0 : level > 4 ? 4 : level], t_role, t_node, msg);
}
