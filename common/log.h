/* log.h — leveled logging to stderr. Each line carries a UTC timestamp, the level, the
 * role and node id of the reactor thread that logs it (several nodes may share one
 * process in embedded mode, so the context is per thread). */
#ifndef FX_LOG_H
#define FX_LOG_H

#include "fx.h"

typedef enum fx_log_level {
    FX_LOG_DEBUG = 0,
    FX_LOG_INFO = 1,
    FX_LOG_WARN = 2,
    FX_LOG_ERROR = 3,
    FX_LOG_OFF = 4
} fx_log_level_t;

/* Parses "debug|info|warn|error|off"; returns -1 when unknown. */
FX_INTERNAL int fx_log_level_parse(const char *s);
FX_INTERNAL const char *fx_log_level_name(int level);

/* Process-wide threshold (the lowest level of all nodes in the process wins). */
FX_INTERNAL void fx_log_set_level(int level);
FX_INTERNAL int fx_log_get_level(void);
/* A node's or client's configured level: the first one sets the threshold, later ones
 * that name log_level (given) can only lower it (the most verbose node in the process
 * wins); a later one that names none leaves it. */
FX_INTERNAL void fx_log_apply_config_level(int level, bool given);

/* Per-thread context printed on each line: role ("master", "owner", "external",
 * "cli") and node id. Strings are copied. */
FX_INTERNAL void fx_log_set_context(const char *role, const char *node_id);

FX_INTERNAL void fx_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last ERROR message (without timestamp and context), kept even when
 * the level hides it ("off"): a node's start failure says why to its launcher. "" after
 * fx_log_last_error_clear or when none. */
FX_INTERNAL const char *fx_log_last_error(void);
FX_INTERNAL void fx_log_last_error_clear(void);

#define FX_DEBUG(...) do { if (fx_log_get_level() <= FX_LOG_DEBUG) fx_log(FX_LOG_DEBUG, __VA_ARGS__); } while (0)
#define FX_INFO(...) fx_log(FX_LOG_INFO, __VA_ARGS__)
#define FX_WARN(...) fx_log(FX_LOG_WARN, __VA_ARGS__)
#define FX_ERROR(...) fx_log(FX_LOG_ERROR, __VA_ARGS__)

#endif
