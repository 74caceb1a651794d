/* The evidence store: one SQLite file (<state_dir>/evidence.db, WAL) holding what the Runtime has
 * measured or observed and must not forget - engine crashes, calibration runs, conformance runs,
 * benchmark A/B results and the engine's own capability evidence (llama.cpp GET /props). Every
 * write is one transaction; a failed write (disk full, locked, I/O error) leaves every earlier
 * record intact. Design, schema and fault behaviour: docs/STORE.md.
 *
 * Ownership: a qr_store owns its connection and is used by one thread at a time. Records passed
 * to the *_add functions are borrowed for the call. Records returned by the *_list functions live
 * in the caller's arena (strings included) and stay valid until the arena is cleaned up. */
#ifndef QR_STORE_STORE_H
#define QR_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/err.h"

#define QR_STORE_FILE            "evidence.db" /* file name inside state_dir */
#define QR_STORE_SCHEMA_VERSION  2             /* the newest schema this build writes */
#define QR_STORE_DEFAULT_BUSY_MS 2000u         /* how long a locked file is waited for */
#define QR_STORE_MAX_ROWS        1000u         /* cap on rows one list call returns */
#define QR_STORE_MAX_JSON        (4u << 20)    /* cap on one JSON column, bytes */
#define QR_STORE_MAX_TEXT        4096u         /* cap on one short text column, bytes */
#define QR_STORE_MAX_LOG_TAIL    16384u        /* crash log tails keep their last bytes */

/* Why a store call failed, finer than enum qr_err (which maps several of these to QR_ERR_IO). */
enum qr_store_fault {
    QR_STORE_FAULT_NONE = 0,
    QR_STORE_FAULT_FULL = 1,       /* disk or page cap full (SQLITE_FULL); QR_ERR_IO */
    QR_STORE_FAULT_BUSY = 2,       /* locked by another connection past the timeout; QR_ERR_BUSY */
    QR_STORE_FAULT_IO = 3,         /* read/write/open failed at the OS level; QR_ERR_IO */
    QR_STORE_FAULT_CORRUPT = 4,    /* not a database or failed its check; QR_ERR_INVALID */
    QR_STORE_FAULT_NEWER = 5,      /* written by a newer schema version; QR_ERR_CONFIG */
    QR_STORE_FAULT_FOREIGN = 6,    /* a SQLite file that is not an evidence store; QR_ERR_INVALID */
    QR_STORE_FAULT_CONSTRAINT = 7, /* a record the schema refused; QR_ERR_INVALID */
    QR_STORE_FAULT_OTHER = 8,      /* anything else SQLite reported; QR_ERR_INTERNAL */
};

/* Static name of a fault, e.g. "full". Never NULL. */
const char *qr_store_fault_str(enum qr_store_fault f);

enum {
    /* A corrupt file is moved aside to <path>.corrupt-<UTC timestamp> (its -wal next to it) and a
     * new empty store is created. Without this flag open refuses a corrupt file and leaves it
     * untouched. */
    QR_STORE_RECREATE_CORRUPT = 1u << 0,
};

struct qr_store_opts {
    unsigned flags;           /* QR_STORE_* flags */
    unsigned busy_timeout_ms; /* wait for a lock at most this long; 0 = QR_STORE_DEFAULT_BUSY_MS */
};

struct qr_store_open_info {
    bool created;              /* no store was there (missing or empty file): a new one was made */
    bool recreated;            /* a corrupt file was moved aside and a new store made */
    int schema_found;          /* schema version found on disk before migrating (0 = new) */
    enum qr_store_fault fault; /* why open failed, or CORRUPT when it recreated */
    char moved_to[4096 + 64];  /* where the corrupt file went; "" when nothing moved */
};

struct qr_store;

/* Open or create the store at path (normally <state_dir>/QR_STORE_FILE; the directory must
 * exist). Sets WAL, synchronous=FULL, foreign keys and the busy timeout, checks the file
 * (PRAGMA quick_check) and migrates the schema forward. Fails with QR_ERR_CONFIG for a file from
 * a newer schema, QR_ERR_INVALID for a corrupt or foreign file (unless QR_STORE_RECREATE_CORRUPT),
 * QR_ERR_BUSY when the file stays locked past the busy timeout, QR_ERR_IO when it cannot be read
 * or created. opts and out_info may be NULL. *out is owned by the caller (qr_store_close). */
enum qr_err qr_store_open(const char *path, const struct qr_store_opts *opts, struct qr_store **out,
                          struct qr_store_open_info *out_info, struct qr_diag *diag);

/* Close the connection (checkpointing the WAL when it is the last one) and free s. NULL is fine. */
void qr_store_close(struct qr_store *s);

/* The fault of the last failed call on s; QR_STORE_FAULT_NONE after a successful one. */
enum qr_store_fault qr_store_last_fault(const struct qr_store *s);

/* The path s was opened with (borrowed). */
const char *qr_store_path(const struct qr_store *s);

/* --- records ------------------------------------------------------------------------------ */

/* Times are Unix epoch milliseconds; a record added with time_ms 0 gets the current time. Text
 * fields are at most QR_STORE_MAX_TEXT bytes, JSON fields valid JSON of at most QR_STORE_MAX_JSON
 * bytes (QR_ERR_TOO_LARGE / QR_ERR_INVALID otherwise). id is assigned by *_add. */

struct qr_store_crash {
    int64_t id;
    int64_t time_ms;
    const char *backend_id;
    const char *model;
    const char *engine_version;
    int64_t pid;
    int exit_code;        /* valid when signal is 0 */
    int signal;           /* the signal that killed the engine; 0 = it exited with exit_code */
    const char *reason;   /* one line: "killed by signal 9", "health check timed out" */
    const char *log_tail; /* last lines of the engine's output; only the last
                             QR_STORE_MAX_LOG_TAIL bytes are kept */
};

struct qr_store_calibration {
    int64_t id;
    int64_t time_ms;
    const char *host_fingerprint;
    const char *engine_version;
    const char *model;    /* NULL for a host-only run (memory bandwidth without a model) */
    int threads;          /* > 0 */
    double prefill_tps;   /* tokens/s; NAN = not measured */
    double decode_tps;    /* tokens/s; NAN = not measured */
    double mem_bw_gbs;    /* GB/s; NAN = not measured */
    const char *raw_json; /* the full measurement */
};

struct qr_store_conformance {
    int64_t id;
    int64_t time_ms;
    const char *backend_id;
    const char *kind; /* "pinned", "candidate", ...: what the run was for */
    const char *engine_version;
    const char *model;
    const char *hardware_class;
    int64_t n_pass, n_fail, n_skip; /* >= 0 */
    const char *report_json;
};

struct qr_store_bench {
    int64_t id;
    int64_t time_ms;
    const char *name;
    const char *model; /* NULL when the benchmark is not about one model */
    const char *variant_a;
    const char *variant_b;
    const char *metric; /* "decode_tps", "ttft_ms", ... */
    const char *values_json;
};

/* One observation of an engine's own capability evidence about a model (llama.cpp GET /props of a
 * ready process), keyed by backend, model, artifact and engine version. */
struct qr_store_evidence {
    int64_t id;
    int64_t time_ms;
    const char *backend_id;
    const char *model;          /* canonical id */
    const char *artifact;       /* "sha256:<hex>" when the file's digest is known, else its path */
    const char *engine_version; /* the probed engine version */
    bool supports_tools;        /* chat_template_caps.supports_tools */
    bool supports_parallel_tool_calls;
    bool supports_system_role;
    bool vision, audio;     /* modalities */
    int64_t n_ctx_slot;     /* one slot's context; > 0 */
    const char *build_info; /* the engine's build_info ("b11669-Debian"); "" when not sent */
    const char *facts_json; /* every observed fact as a JSON object (all template caps, ...) */
    int64_t observations;   /* qr_store_evidence_latest only: rows with this row's key; else 0 */
};

/* Which rows a list call returns, newest first (time_ms, then id). NULL/0 fields do not filter.
 * A field set for a record type that has no such column is refused (QR_ERR_INVALID), so a filter
 * never silently matches everything. */
struct qr_store_filter {
    const char *backend_id;       /* crash, conformance, evidence */
    const char *model;            /* crash, calibration, conformance, bench, evidence */
    const char *engine_version;   /* crash, calibration, conformance, evidence */
    const char *host_fingerprint; /* calibration */
    const char *kind;             /* conformance */
    const char *name;             /* bench */
    int64_t since_ms;             /* rows with time_ms >= since_ms */
    size_t limit;                 /* 0 or more than QR_STORE_MAX_ROWS = QR_STORE_MAX_ROWS */
};

/* Add one record in one transaction; out_id (may be NULL) receives its id. On failure nothing was
 * written and every earlier record is intact; qr_store_last_fault says why. */
enum qr_err qr_store_crash_add(struct qr_store *s, const struct qr_store_crash *rec,
                               int64_t *out_id, struct qr_diag *diag);
enum qr_err qr_store_calibration_add(struct qr_store *s, const struct qr_store_calibration *rec,
                                     int64_t *out_id, struct qr_diag *diag);
enum qr_err qr_store_conformance_add(struct qr_store *s, const struct qr_store_conformance *rec,
                                     int64_t *out_id, struct qr_diag *diag);
enum qr_err qr_store_bench_add(struct qr_store *s, const struct qr_store_bench *rec,
                               int64_t *out_id, struct qr_diag *diag);
enum qr_err qr_store_evidence_add(struct qr_store *s, const struct qr_store_evidence *rec,
                                  int64_t *out_id, struct qr_diag *diag);

/* Rows matching f (NULL = all, up to QR_STORE_MAX_ROWS), newest first, into an array allocated in
 * arena a (QR_ERR_NOMEM when the arena's cap is reached). *out_n may be 0. */
enum qr_err qr_store_crash_list(struct qr_store *s, const struct qr_store_filter *f,
                                struct qr_arena *a, struct qr_store_crash **out, size_t *out_n,
                                struct qr_diag *diag);
enum qr_err qr_store_calibration_list(struct qr_store *s, const struct qr_store_filter *f,
                                      struct qr_arena *a, struct qr_store_calibration **out,
                                      size_t *out_n, struct qr_diag *diag);
enum qr_err qr_store_conformance_list(struct qr_store *s, const struct qr_store_filter *f,
                                      struct qr_arena *a, struct qr_store_conformance **out,
                                      size_t *out_n, struct qr_diag *diag);
enum qr_err qr_store_bench_list(struct qr_store *s, const struct qr_store_filter *f,
                                struct qr_arena *a, struct qr_store_bench **out, size_t *out_n,
                                struct qr_diag *diag);
enum qr_err qr_store_evidence_list(struct qr_store *s, const struct qr_store_filter *f,
                                   struct qr_arena *a, struct qr_store_evidence **out,
                                   size_t *out_n, struct qr_diag *diag);

/* The newest evidence row per (backend, model, artifact, engine version) among the rows matching
 * f (backend_id, model, engine_version, since_ms), newest first, each with observations set to
 * how many rows share its key. limit caps the keys returned. */
enum qr_err qr_store_evidence_latest(struct qr_store *s, const struct qr_store_filter *f,
                                     struct qr_arena *a, struct qr_store_evidence **out,
                                     size_t *out_n, struct qr_diag *diag);

/* How many crash records match f (limit is ignored): the total behind a bounded list. */
enum qr_err qr_store_crash_count(struct qr_store *s, const struct qr_store_filter *f,
                                 int64_t *out_n, struct qr_diag *diag);

/* --- operations --------------------------------------------------------------------------- */

struct qr_store_stats {
    int schema_version;
    int64_t crashes;
    int64_t calibrations;
    int64_t conformance_runs;
    int64_t bench_results;
    int64_t evidence;  /* engine evidence observations */
    int64_t db_bytes;  /* size of the main file */
    int64_t wal_bytes; /* size of the -wal file; 0 when absent */
    int64_t page_size;
    int64_t page_count;
    int64_t free_pages;
    char journal_mode[16]; /* "wal" */
    int synchronous;       /* SQLite's number: 2 = FULL */
};

/* Row counts per table, file sizes and the connection's durability settings, for a status
 * endpoint. */
enum qr_err qr_store_stats(struct qr_store *s, struct qr_store_stats *out, struct qr_diag *diag);

/* Write a consistent copy of the running store to dest_path (VACUUM INTO; dest must not exist).
 * Writers are not blocked (WAL): the copy reads one snapshot. */
enum qr_err qr_store_backup(struct qr_store *s, const char *dest_path, struct qr_diag *diag);

/* Run PRAGMA integrity_check (bounded to the first problem found). QR_OK when the file is sound,
 * QR_ERR_INVALID with the first problem in diag otherwise. */
enum qr_err qr_store_check(struct qr_store *s, struct qr_diag *diag);

/* Cap the database at max_pages pages for this connection (SQLite's max_page_count): a write that
 * would grow it further fails with QR_STORE_FAULT_FULL like a full disk. 0 restores the default.
 * Used to bound the store's size and by the fault tests. out_pages (may be NULL) receives the cap
 * in effect, which is never below the current size. */
enum qr_err qr_store_limit_pages(struct qr_store *s, int64_t max_pages, int64_t *out_pages,
                                 struct qr_diag *diag);

#endif
