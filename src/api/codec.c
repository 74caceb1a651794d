/* Helpers shared by the client codecs: the protocol-neutral error record, decoding limits and
 * the timestamp format Ollama clients expect. */
#include "api/codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum qr_err qr_api_error_set(struct qr_api_error *e, enum qr_err err, int status, const char *code,
                             const char *param, const char *fmt, ...)
{
    if (!e)
        return err;
    e->status = status;
    snprintf(e->code, sizeof(e->code), "%s", code ? code : "");
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return err;
}

void qr_decode_limits_default(struct qr_decode_limits *l)
{
    l->max_messages = 100000;
    l->max_tools = 1024;
    l->max_stop = 16;
    l->max_inputs = 100000;
}

void qr_format_rfc3339_ns(int64_t unix_ns, char *out, size_t cap)
{
    int64_t sec = unix_ns / 1000000000;
    int64_t ns = unix_ns % 1000000000;
    if (ns < 0) {
        ns += 1000000000;
        sec--;
    }
    time_t t = (time_t) sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long) ns);
}
