/* Logging: one line per event on stdout (as the predecessor did), JSON or key=value.
 *
 * QR_LOG checks the level before evaluating its arguments, so a disabled debug line costs one
 * compare. Fields are given as a printf format of key=value pairs: in JSON mode the message and
 * each value become JSON strings or numbers; nothing in a log line may be a body or a secret. */
#ifndef QR_CORE_LOG_H
#define QR_CORE_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum qr_log_level { QR_LOG_DEBUG = 0, QR_LOG_INFO = 1, QR_LOG_WARN = 2, QR_LOG_ERROR = 3 };
enum qr_log_format { QR_LOG_JSON = 0, QR_LOG_TEXT = 1 };

extern enum qr_log_level qr_log_min_level;

void qr_log_setup(enum qr_log_level min, enum qr_log_format fmt);

/* A structured field: key and value. Strings are escaped in JSON mode. */
struct qr_log_field {
    const char *key;
    const char *str; /* used when non-NULL */
    int64_t num;     /* used when str is NULL */
    bool is_bool;    /* num is a boolean: written true/false */
};

#define QR_LF_S(k, v) ((struct qr_log_field){(k), (v) ? (v) : "", 0, false})
#define QR_LF_N(k, v) ((struct qr_log_field){(k), NULL, (int64_t) (v), false})
#define QR_LF_B(k, v) ((struct qr_log_field){(k), NULL, (v) ? 1 : 0, true})

/* Write one line with msg and n fields. Prefer the QR_LOG macro. */
void qr_log_write(enum qr_log_level level, const char *msg, const struct qr_log_field *fields,
                  unsigned n);

#define QR_LOG(level, msg, ...)                                                                    \
    do {                                                                                           \
        if ((level) >= qr_log_min_level) {                                                         \
            const struct qr_log_field qr__f[] = {{NULL, NULL, 0, false}, __VA_ARGS__};             \
            qr_log_write((level), (msg), qr__f + 1, sizeof(qr__f) / sizeof(qr__f[0]) - 1);         \
        }                                                                                          \
    } while (0)

#define QR_LOG0(level, msg)                                                                        \
    do {                                                                                           \
        if ((level) >= qr_log_min_level)                                                           \
            qr_log_write((level), (msg), NULL, 0);                                                 \
    } while (0)

#endif
