/* Log line formatting. Lines are assembled in a stack buffer and written with one write(2), so
 * lines from one process never interleave. */
#include "core/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum qr_log_level qr_log_min_level = QR_LOG_INFO;
static enum qr_log_format log_format = QR_LOG_JSON;

void qr_log_setup(enum qr_log_level min, enum qr_log_format fmt)
{
    qr_log_min_level = min;
    log_format = fmt;
}

struct line {
    char buf[2048];
    size_t len;
};

static void put(struct line *l, const char *s, size_t n)
{
    size_t room = sizeof(l->buf) - 2 - l->len; /* keep space for '\n' */
    if (n > room)
        n = room;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void puts_(struct line *l, const char *s)
{
    put(l, s, strlen(s));
}

static void put_json_str(struct line *l, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    put(l, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char) c};
            put(l, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(l, e, 6);
        } else {
            put(l, (const char *) &c, 1);
        }
    }
    put(l, "\"", 1);
}

/* key=value form: values with spaces, quotes or '=' are quoted. */
static void put_text_val(struct line *l, const char *s)
{
    if (*s && !strpbrk(s, " \"=\t\n")) {
        puts_(l, s);
        return;
    }
    put_json_str(l, s);
}

static const char *level_name(enum qr_log_level level)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    return level <= QR_LOG_ERROR ? names[level] : "info";
}

void qr_log_write(enum qr_log_level level, const char *msg, const struct qr_log_field *fields,
                  unsigned n)
{
    struct line l = {.len = 0};
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[64];
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int) (tv.tv_usec / 1000));
    char num[32];
    if (log_format == QR_LOG_JSON) {
        puts_(&l, "{\"time\":\"");
        puts_(&l, ts);
        puts_(&l, "\",\"level\":\"");
        puts_(&l, level_name(level));
        puts_(&l, "\",\"msg\":");
        put_json_str(&l, msg);
        for (unsigned i = 0; i < n; i++) {
            puts_(&l, ",");
            put_json_str(&l, fields[i].key);
            puts_(&l, ":");
            if (fields[i].str) {
                put_json_str(&l, fields[i].str);
            } else if (fields[i].is_bool) {
                puts_(&l, fields[i].num ? "true" : "false");
            } else {
                snprintf(num, sizeof(num), "%" PRId64, fields[i].num);
                puts_(&l, num);
            }
        }
        puts_(&l, "}");
    } else {
        puts_(&l, "time=");
        puts_(&l, ts);
        puts_(&l, " level=");
        puts_(&l, level_name(level));
        puts_(&l, " msg=");
        put_text_val(&l, msg);
        for (unsigned i = 0; i < n; i++) {
            puts_(&l, " ");
            puts_(&l, fields[i].key);
            puts_(&l, "=");
            if (fields[i].str) {
                put_text_val(&l, fields[i].str);
            } else if (fields[i].is_bool) {
                puts_(&l, fields[i].num ? "true" : "false");
            } else {
                snprintf(num, sizeof(num), "%" PRId64, fields[i].num);
                puts_(&l, num);
            }
        }
    }
    l.buf[l.len++] = '\n';
    ssize_t w = write(STDOUT_FILENO, l.buf, l.len);
    (void) w;
}
