/* The evidence store: the Runtime's memory of what it measured and observed (engine crashes,
 * calibration runs, conformance runs, benchmark A/B results, the engine's capability evidence) in
 * one SQLite file in WAL mode with synchronous=FULL, so that a committed record survives a crash
 * of the process or of the machine.
 * Opening checks the file before trusting it (header, PRAGMA quick_check, schema version) and
 * never replaces a damaged file silently; every write is one IMMEDIATE transaction, and a write
 * that fails (disk full, lock timeout, I/O error) rolls back without touching earlier records.
 * SQLite result codes become a qr_err plus a finer qr_store_fault at this boundary. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <yyjson.h>

#include "core/log.h"

/* PRAGMA application_id of an evidence store: "QRev". A SQLite file with another non-zero id
 * belongs to something else and is refused rather than migrated. */
#define STORE_APP_ID 0x51526576

struct qr_store {
    sqlite3 *db;                    /* owned */
    char *path;                     /* owned */
    int64_t default_max_pages;      /* max_page_count when opened, restored by limit_pages(0) */
    enum qr_store_fault last_fault; /* of the last call */
    bool opening;                   /* open reports its own failures: fail_rc stays quiet */
};

static const char *const fault_names[] = {
    [QR_STORE_FAULT_NONE] = "none",       [QR_STORE_FAULT_FULL] = "full",
    [QR_STORE_FAULT_BUSY] = "busy",       [QR_STORE_FAULT_IO] = "io",
    [QR_STORE_FAULT_CORRUPT] = "corrupt", [QR_STORE_FAULT_NEWER] = "newer_schema",
    [QR_STORE_FAULT_FOREIGN] = "foreign", [QR_STORE_FAULT_CONSTRAINT] = "constraint",
    [QR_STORE_FAULT_OTHER] = "other",
};

const char *qr_store_fault_str(enum qr_store_fault f)
{
    if ((unsigned) f >= QR_ARRAY_LEN(fault_names) || !fault_names[f])
        return "unknown";
    return fault_names[f];
}

enum qr_store_fault qr_store_last_fault(const struct qr_store *s)
{
    return s ? s->last_fault : QR_STORE_FAULT_NONE;
}

const char *qr_store_path(const struct qr_store *s)
{
    return s ? s->path : NULL;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- SQLite result codes at the boundary -------------------------------------------------- */

static enum qr_store_fault fault_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return QR_STORE_FAULT_FULL;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return QR_STORE_FAULT_BUSY;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
    case SQLITE_NOLFS:
        return QR_STORE_FAULT_IO;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return QR_STORE_FAULT_CORRUPT;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
        return QR_STORE_FAULT_CONSTRAINT;
    default:
        return QR_STORE_FAULT_OTHER;
    }
}

static enum qr_err err_of(int rc, enum qr_store_fault f)
{
    if ((rc & 0xff) == SQLITE_NOMEM)
        return QR_ERR_NOMEM;
    if ((rc & 0xff) == SQLITE_TOOBIG)
        return QR_ERR_TOO_LARGE;
    switch (f) {
    case QR_STORE_FAULT_FULL:
    case QR_STORE_FAULT_IO:
        return QR_ERR_IO;
    case QR_STORE_FAULT_BUSY:
        return QR_ERR_BUSY;
    case QR_STORE_FAULT_CORRUPT:
    case QR_STORE_FAULT_CONSTRAINT:
    case QR_STORE_FAULT_FOREIGN:
        return QR_ERR_INVALID;
    case QR_STORE_FAULT_NEWER:
        return QR_ERR_CONFIG;
    default:
        return QR_ERR_INTERNAL;
    }
}

/* Turn a failed SQLite call into a qr_err, record the fault on s and describe it in diag. Faults
 * that mean the store is in trouble (full, I/O, corrupt) are also logged: evidence that cannot
 * be written must not fail quietly. */
static enum qr_err fail_rc(struct qr_store *s, int rc, const char *what, struct qr_diag *diag)
{
    enum qr_store_fault f = fault_of(rc);
    s->last_fault = f;
    const char *detail = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if (!s->opening &&
        (f == QR_STORE_FAULT_FULL || f == QR_STORE_FAULT_IO || f == QR_STORE_FAULT_CORRUPT))
        QR_LOG(QR_LOG_ERROR, "evidence store operation failed", QR_LF_S("path", s->path),
               QR_LF_S("op", what), QR_LF_S("fault", qr_store_fault_str(f)),
               QR_LF_S("detail", detail));
    return qr_diag_set(diag, err_of(rc, f), "evidence store '%s': cannot %s: %s (%s)", s->path,
                       what, detail, qr_store_fault_str(f));
}

static enum qr_err fail_fault(struct qr_store *s, enum qr_store_fault f, enum qr_err err,
                              struct qr_diag *diag, const char *msg, const char *detail)
{
    s->last_fault = f;
    return qr_diag_set(diag, err, "evidence store '%s': %s%s", s->path, msg, detail ? detail : "");
}

/* Run one statement that returns at most one row whose first column is read into *out_int or
 * *out_text (either may be NULL). rc of the failing call, SQLITE_OK when it worked. */
static int query1(sqlite3 *db, const char *sql, int64_t *out_int, char *out_text, size_t text_n)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (out_int)
            *out_int = sqlite3_column_int64(st, 0);
        if (out_text && text_n) {
            const unsigned char *t = sqlite3_column_text(st, 0);
            snprintf(out_text, text_n, "%s", t ? (const char *) t : "");
        }
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        if (out_int)
            *out_int = 0;
        if (out_text && text_n)
            out_text[0] = '\0';
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

/* --- schema ------------------------------------------------------------------------------- */

/* Forward migrations: migrations[i] takes the schema from version i to i+1. Append only; a
 * released step is never edited. Each runs inside the open's migration transaction. */
static const char *const migrations[] = {
    /* v0 -> v1 */
    "CREATE TABLE schema_version ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_ms INTEGER NOT NULL);"
    "CREATE TABLE engine_crash ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  backend_id TEXT NOT NULL,"
    "  model TEXT NOT NULL,"
    "  engine_version TEXT NOT NULL,"
    "  pid INTEGER NOT NULL,"
    "  exit_code INTEGER," /* NULL when killed by a signal */
    "  signal INTEGER,"    /* NULL when it exited */
    "  reason TEXT NOT NULL,"
    "  log_tail TEXT NOT NULL,"
    "  CHECK ((exit_code IS NULL) <> (signal IS NULL)));"
    "CREATE INDEX engine_crash_by_backend ON engine_crash (backend_id, time_ms);"
    "CREATE TABLE calibration_run ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  host_fingerprint TEXT NOT NULL,"
    "  engine_version TEXT NOT NULL,"
    "  model TEXT," /* NULL for a host-only run */
    "  threads INTEGER NOT NULL CHECK (threads > 0),"
    "  prefill_tps REAL CHECK (prefill_tps >= 0)," /* NULL = not measured */
    "  decode_tps REAL CHECK (decode_tps >= 0),"
    "  mem_bw_gbs REAL CHECK (mem_bw_gbs >= 0),"
    "  raw_json TEXT NOT NULL);"
    "CREATE INDEX calibration_run_by_host ON calibration_run (host_fingerprint, model, time_ms);"
    "CREATE TABLE conformance_run ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  backend_id TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  engine_version TEXT NOT NULL,"
    "  model TEXT NOT NULL,"
    "  hardware_class TEXT NOT NULL,"
    "  n_pass INTEGER NOT NULL CHECK (n_pass >= 0),"
    "  n_fail INTEGER NOT NULL CHECK (n_fail >= 0),"
    "  n_skip INTEGER NOT NULL CHECK (n_skip >= 0),"
    "  report_json TEXT NOT NULL);"
    "CREATE INDEX conformance_run_by_backend ON conformance_run"
    "  (backend_id, engine_version, model, time_ms);"
    "CREATE TABLE bench_ab ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  model TEXT,"
    "  variant_a TEXT NOT NULL,"
    "  variant_b TEXT NOT NULL,"
    "  metric TEXT NOT NULL,"
    "  values_json TEXT NOT NULL);"
    "CREATE INDEX bench_ab_by_name ON bench_ab (name, time_ms);",
    /* v1 -> v2: the engine's own capability evidence (llama.cpp GET /props) */
    "CREATE TABLE engine_evidence ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  backend_id TEXT NOT NULL,"
    "  model TEXT NOT NULL,"
    "  artifact TEXT NOT NULL," /* sha256:<hex> when known, else the path */
    "  engine_version TEXT NOT NULL,"
    "  supports_tools INTEGER NOT NULL CHECK (supports_tools IN (0, 1)),"
    "  supports_parallel_tool_calls INTEGER NOT NULL"
    "    CHECK (supports_parallel_tool_calls IN (0, 1)),"
    "  supports_system_role INTEGER NOT NULL CHECK (supports_system_role IN (0, 1)),"
    "  vision INTEGER NOT NULL CHECK (vision IN (0, 1)),"
    "  audio INTEGER NOT NULL CHECK (audio IN (0, 1)),"
    "  n_ctx_slot INTEGER NOT NULL CHECK (n_ctx_slot > 0),"
    "  build_info TEXT NOT NULL,"
    "  facts_json TEXT NOT NULL);"
    "CREATE INDEX engine_evidence_by_model ON engine_evidence"
    "  (backend_id, model, engine_version, time_ms);"
    /* one row per load or restart: keep the newest 64 per key, so a model loaded all day does
     * not grow the file without bound (observations then counts at most 64) */
    "CREATE TRIGGER engine_evidence_keep AFTER INSERT ON engine_evidence BEGIN"
    "  DELETE FROM engine_evidence WHERE backend_id = NEW.backend_id AND model = NEW.model"
    "    AND engine_version = NEW.engine_version AND artifact = NEW.artifact AND id NOT IN"
    "    (SELECT id FROM engine_evidence WHERE backend_id = NEW.backend_id AND model = NEW.model"
    "      AND engine_version = NEW.engine_version AND artifact = NEW.artifact"
    "      ORDER BY time_ms DESC, id DESC LIMIT 64);"
    " END;",
};

_Static_assert(QR_ARRAY_LEN(migrations) == QR_STORE_SCHEMA_VERSION,
               "one migration per schema version");

/* Schema version on disk: 0 for an empty file; -1 (fault FOREIGN) for a file with tables but no
 * schema_version table or another application id. rc of a failing SQLite call. */
static int read_version(sqlite3 *db, int64_t *out_version)
{
    int64_t app = 0, has_table = 0, n_tables = 0;
    int rc = query1(db, "PRAGMA application_id", &app, NULL, 0);
    if (rc == SQLITE_OK)
        rc = query1(db,
                    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE "
                    "'sqlite\\_%' ESCAPE '\\'",
                    &n_tables, NULL, 0);
    if (rc == SQLITE_OK)
        rc = query1(db,
                    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = "
                    "'schema_version'",
                    &has_table, NULL, 0);
    if (rc != SQLITE_OK)
        return rc;
    if (app != 0 && app != STORE_APP_ID) {
        *out_version = -1;
        return SQLITE_OK;
    }
    if (!has_table) {
        *out_version = n_tables ? -1 : 0;
        return SQLITE_OK;
    }
    return query1(db, "SELECT coalesce(max(version), 0) FROM schema_version", out_version, NULL, 0);
}

/* Bring the schema from its version on disk to QR_STORE_SCHEMA_VERSION in one transaction. The
 * version is read again under the write lock, so two processes opening a new file at once do
 * not both migrate. */
static enum qr_err migrate(struct qr_store *s, struct qr_diag *diag)
{
    int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "start the schema migration", diag);
    int64_t v = 0;
    rc = read_version(s->db, &v);
    if (rc != SQLITE_OK)
        goto fail;
    if (v < 0 || v > QR_STORE_SCHEMA_VERSION) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return fail_fault(s, v < 0 ? QR_STORE_FAULT_FOREIGN : QR_STORE_FAULT_NEWER,
                          v < 0 ? QR_ERR_INVALID : QR_ERR_CONFIG, diag,
                          "changed by another process during open", NULL);
    }
    for (int64_t i = v; i < QR_STORE_SCHEMA_VERSION; i++) {
        rc = sqlite3_exec(s->db, migrations[i], NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            goto fail;
        char sql[128];
        snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%lld, %lld)",
                 (long long) (i + 1), (long long) now_ms());
        rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            goto fail;
    }
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA application_id = %d", STORE_APP_ID);
    rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    if (v < QR_STORE_SCHEMA_VERSION)
        QR_LOG(QR_LOG_INFO, "evidence store schema migrated", QR_LF_S("path", s->path),
               QR_LF_N("from", v), QR_LF_N("to", QR_STORE_SCHEMA_VERSION));
    return QR_OK;

fail:;
    enum qr_err err = fail_rc(s, rc, "migrate the schema", diag);
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}

/* --- open --------------------------------------------------------------------------------- */

/* Look at the file before SQLite does: missing or empty is a new store; anything else must be a
 * whole number of pages with the SQLite header. QR_OK, or QR_ERR_INVALID (fault CORRUPT) /
 * QR_ERR_IO with diag set. Reading the header ourselves means a damaged file is judged without
 * SQLite writing anything next to it. */
static enum qr_err check_header(struct qr_store *s, struct qr_diag *diag)
{
    struct stat st;
    if (stat(s->path, &st) != 0) {
        if (errno == ENOENT)
            return QR_OK;
        return fail_fault(s, QR_STORE_FAULT_IO, QR_ERR_IO, diag, "cannot stat: ", strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return fail_fault(s, QR_STORE_FAULT_IO, QR_ERR_IO, diag, "not a regular file", NULL);
    if (st.st_size == 0)
        return QR_OK;
    /* read through SQLite's own file handle: an open()/close() of our own would drop every POSIX
     * lock this process holds on the file, another connection's included */
    unsigned char h[100];
    sqlite3_file *fp = NULL;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_FILE_POINTER, &fp) != SQLITE_OK || !fp ||
        !fp->pMethods)
        return fail_fault(s, QR_STORE_FAULT_IO, QR_ERR_IO, diag, "cannot open: ", "no file handle");
    int xrc = fp->pMethods->xRead(fp, h, (int) sizeof h, 0);
    if (xrc != SQLITE_OK && xrc != SQLITE_IOERR_SHORT_READ)
        return fail_fault(s, QR_STORE_FAULT_IO, QR_ERR_IO, diag,
                          "cannot read: ", sqlite3_errstr(xrc));
    ssize_t n = xrc == SQLITE_OK ? (ssize_t) sizeof h : 0;
    if (n < (ssize_t) sizeof(h) || memcmp(h, "SQLite format 3", 16) != 0)
        return fail_fault(s, QR_STORE_FAULT_CORRUPT, QR_ERR_INVALID, diag,
                          "corrupt: not a SQLite database (bad header)", NULL);
    unsigned page = (unsigned) h[16] << 8 | h[17];
    if (page == 1)
        page = 65536;
    if (page < 512 || (page & (page - 1)) != 0)
        return fail_fault(s, QR_STORE_FAULT_CORRUPT, QR_ERR_INVALID, diag,
                          "corrupt: bad page size in the header", NULL);
    if (st.st_size % page != 0)
        return fail_fault(s, QR_STORE_FAULT_CORRUPT, QR_ERR_INVALID, diag,
                          "corrupt: truncated (size is not a whole number of pages)", NULL);
    return QR_OK;
}

/* Connection settings and the full check of what is on disk. Any SQLite error here is reported
 * with its fault (a garbage file shows up as NOTADB/CORRUPT on the first statement). */
static enum qr_err configure_and_check(struct qr_store *s, struct qr_diag *diag)
{
    char mode[32];
    int rc = query1(s->db, "PRAGMA journal_mode = WAL", NULL, mode, sizeof(mode));
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "switch to WAL", diag);
    if (strcmp(mode, "wal") != 0)
        return fail_fault(s, QR_STORE_FAULT_IO, QR_ERR_IO, diag,
                          "cannot switch to WAL, journal mode is ", mode);
    /* FULL: a commit is on stable storage before it returns, also across power loss (NORMAL in
     * WAL mode may lose the last commits then). Evidence writes are rare; the fsync is cheap. */
    rc = sqlite3_exec(s->db, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON", NULL, NULL,
                      NULL);
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "configure the connection", diag);
    char verdict[256];
    rc = query1(s->db, "PRAGMA quick_check(1)", NULL, verdict, sizeof(verdict));
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "check the file", diag);
    if (strcmp(verdict, "ok") != 0)
        return fail_fault(s, QR_STORE_FAULT_CORRUPT, QR_ERR_INVALID, diag,
                          "corrupt: quick_check says ", verdict);
    return QR_OK;
}

static enum qr_err check_version(struct qr_store *s, struct qr_store_open_info *info,
                                 struct qr_diag *diag)
{
    int64_t v = 0;
    int rc = read_version(s->db, &v);
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "read the schema version", diag);
    if (v < 0)
        return fail_fault(s, QR_STORE_FAULT_FOREIGN, QR_ERR_INVALID, diag,
                          "not an evidence store (a SQLite file with other tables or another "
                          "application id): refusing to use it",
                          NULL);
    info->schema_found = (int) v;
    if (v > QR_STORE_SCHEMA_VERSION) {
        s->last_fault = QR_STORE_FAULT_NEWER;
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "evidence store '%s': schema version %lld is newer than this build's "
                           "%d: refusing to open (run a newer quantum-runtime or use another "
                           "state_dir)",
                           s->path, (long long) v, QR_STORE_SCHEMA_VERSION);
    }
    if (v < QR_STORE_SCHEMA_VERSION)
        return migrate(s, diag);
    return QR_OK;
}

static void store_free(struct qr_store *s)
{
    if (!s)
        return;
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

/* One attempt at opening path; on failure s is freed and info->fault says why. */
static enum qr_err open_once(const char *path, unsigned busy_ms, struct qr_store **out,
                             struct qr_store_open_info *info, struct qr_diag *diag)
{
    struct qr_store *s = calloc(1, sizeof(*s));
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return qr_diag_set(diag, QR_ERR_NOMEM, "evidence store '%s': out of memory", path);
    }
    s->opening = true;
    enum qr_err err = QR_OK;
    struct stat st; /* SQLite would open a directory's path with an error of its own */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        err = fail_fault(s, QR_STORE_FAULT_IO, QR_ERR_IO, diag, "not a regular file", NULL);
        goto fail;
    }
    int rc = sqlite3_open_v2(
        path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        err = fail_rc(s, rc, "open", diag);
        goto fail;
    }
    if ((err = check_header(s, diag)))
        goto fail;
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, (int) busy_ms);
    /* until the file has passed its checks, closing must not checkpoint a WAL into it */
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    err = configure_and_check(s, diag);
    if (!err)
        err = check_version(s, info, diag);
    if (err)
        goto fail;
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
    rc = query1(s->db, "PRAGMA max_page_count", &s->default_max_pages, NULL, 0);
    if (rc != SQLITE_OK) {
        err = fail_rc(s, rc, "read max_page_count", diag);
        goto fail;
    }
    info->created = info->schema_found == 0;
    s->last_fault = QR_STORE_FAULT_NONE;
    s->opening = false;
    *out = s;
    return QR_OK;

fail:
    info->fault = s->last_fault;
    store_free(s);
    return err;
}

/* Rename path (and its -wal, -journal) to path.corrupt-<UTC time>[-n]; drop the -shm, which only
 * indexes the WAL and is rebuilt. */
static enum qr_err move_aside(const char *path, struct qr_store_open_info *info,
                              struct qr_diag *diag)
{
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
    char dest[sizeof(info->moved_to)];
    for (int n = 1;; n++) {
        if (n == 1)
            snprintf(dest, sizeof(dest), "%s.corrupt-%s", path, stamp);
        else
            snprintf(dest, sizeof(dest), "%s.corrupt-%s-%d", path, stamp, n);
        if (access(dest, F_OK) != 0)
            break;
        if (n == 100)
            return qr_diag_set(diag, QR_ERR_IO,
                               "evidence store '%s': cannot find a free name "
                               "to move the corrupt file aside",
                               path);
    }
    if (rename(path, dest) != 0)
        return qr_diag_set(diag, QR_ERR_IO,
                           "evidence store '%s': cannot move the corrupt file "
                           "to '%s': %s",
                           path, dest, strerror(errno));
    snprintf(info->moved_to, sizeof(info->moved_to), "%s", dest);
    static const char *const sides[] = {"-wal", "-journal"};
    for (size_t i = 0; i < QR_ARRAY_LEN(sides); i++) {
        char from[sizeof(info->moved_to)], to[sizeof(info->moved_to) + 16];
        snprintf(from, sizeof(from), "%s%s", path, sides[i]);
        snprintf(to, sizeof(to), "%s%s", dest, sides[i]);
        if (rename(from, to) != 0 && errno != ENOENT)
            return qr_diag_set(diag, QR_ERR_IO, "evidence store '%s': cannot move '%s' aside: %s",
                               path, from, strerror(errno));
    }
    char shm[sizeof(info->moved_to)];
    snprintf(shm, sizeof(shm), "%s-shm", path);
    if (unlink(shm) != 0 && errno != ENOENT)
        return qr_diag_set(diag, QR_ERR_IO, "evidence store '%s': cannot remove '%s': %s", path,
                           shm, strerror(errno));
    return QR_OK;
}

enum qr_err qr_store_open(const char *path, const struct qr_store_opts *opts, struct qr_store **out,
                          struct qr_store_open_info *out_info, struct qr_diag *diag)
{
    struct qr_store_open_info local;
    struct qr_store_open_info *info = out_info ? out_info : &local;
    struct qr_diag own_diag = {{0}}; /* the error log line names the cause even without one */
    if (!diag)
        diag = &own_diag;
    memset(info, 0, sizeof(*info));
    *out = NULL;
    if (!path || !*path || strlen(path) >= 4096)
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence store path is empty or too long");
    unsigned flags = opts ? opts->flags : 0;
    unsigned busy_ms =
        opts && opts->busy_timeout_ms ? opts->busy_timeout_ms : QR_STORE_DEFAULT_BUSY_MS;
    if (busy_ms > INT_MAX)
        busy_ms = INT_MAX;

    enum qr_err err = open_once(path, busy_ms, out, info, diag);
    if (err == QR_OK || info->fault != QR_STORE_FAULT_CORRUPT)
        return err;
    if (!(flags & QR_STORE_RECREATE_CORRUPT)) {
        const char *detail = diag ? diag->msg : "";
        QR_LOG(QR_LOG_ERROR, "evidence store is corrupt, refusing to open it",
               QR_LF_S("path", path), QR_LF_S("detail", detail));
        return err;
    }
    char first[sizeof(diag->msg)];
    snprintf(first, sizeof(first), "%s", diag ? diag->msg : "corrupt");
    err = move_aside(path, info, diag);
    if (err) {
        info->fault = QR_STORE_FAULT_IO;
        return err;
    }
    const char *moved_to = info->moved_to, *detail = first;
    QR_LOG(QR_LOG_ERROR, "evidence store was corrupt: moved aside, starting a new one",
           QR_LF_S("path", path), QR_LF_S("moved_to", moved_to), QR_LF_S("detail", detail));
    err = open_once(path, busy_ms, out, info, diag);
    if (err)
        return err;
    info->recreated = true;
    info->fault = QR_STORE_FAULT_CORRUPT;
    return QR_OK;
}

void qr_store_close(struct qr_store *s)
{
    store_free(s);
}

/* --- input checks ------------------------------------------------------------------------- */

static enum qr_err check_text(struct qr_store *s, const char *field, const char *v, bool required,
                              struct qr_diag *diag)
{
    if (!v) {
        if (!required)
            return QR_OK;
        s->last_fault = QR_STORE_FAULT_CONSTRAINT;
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence record: '%s' is required", field);
    }
    if (strlen(v) > QR_STORE_MAX_TEXT) {
        s->last_fault = QR_STORE_FAULT_CONSTRAINT;
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "evidence record: '%s' is longer than %u bytes",
                           field, QR_STORE_MAX_TEXT);
    }
    return QR_OK;
}

static enum qr_err check_json(struct qr_store *s, const char *field, const char *v,
                              struct qr_diag *diag)
{
    s->last_fault = QR_STORE_FAULT_CONSTRAINT;
    if (!v)
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence record: '%s' is required", field);
    size_t n = strlen(v);
    if (n > QR_STORE_MAX_JSON)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "evidence record: '%s' is larger than %u bytes",
                           field, QR_STORE_MAX_JSON);
    yyjson_read_err rerr;
    yyjson_doc *doc = yyjson_read_opts((char *) v, n, 0, NULL, &rerr);
    if (!doc)
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence record: '%s' is not JSON: %s at %zu",
                           field, rerr.msg, rerr.pos);
    yyjson_doc_free(doc);
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;
}

static enum qr_err check_measure(struct qr_store *s, const char *field, double v,
                                 struct qr_diag *diag)
{
    if (isnan(v) || (isfinite(v) && v >= 0))
        return QR_OK;
    s->last_fault = QR_STORE_FAULT_CONSTRAINT;
    return qr_diag_set(diag, QR_ERR_INVALID, "evidence record: '%s' must be >= 0 or NAN", field);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        enum qr_err e_ = (call);                                                                   \
        if (e_)                                                                                    \
            return e_;                                                                             \
    } while (0)

/* --- writes ------------------------------------------------------------------------------- */

typedef int (*bind_fn)(sqlite3_stmt *st, const void *rec);

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (!v)
        return sqlite3_bind_null(st, i);
    return sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
}

static int bind_measure(sqlite3_stmt *st, int i, double v)
{
    return isnan(v) ? sqlite3_bind_null(st, i) : sqlite3_bind_double(st, i, v);
}

static int64_t or_now(int64_t t)
{
    return t ? t : now_ms();
}

/* Insert one row in its own IMMEDIATE transaction: the lock is taken (waiting at most the busy
 * timeout) before anything is written, and any failure rolls the whole row back. */
static enum qr_err write_row(struct qr_store *s, const char *what, const char *sql, bind_fn bind,
                             const void *rec, int64_t *out_id, struct qr_diag *diag)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = bind(st, rec);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    if (rc != SQLITE_OK)
        goto fail;
    sqlite3_finalize(st);
    st = NULL;
    int64_t id = sqlite3_last_insert_rowid(s->db);
    rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    if (out_id)
        *out_id = id;
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;

fail:;
    enum qr_err err = fail_rc(s, rc, what, diag);
    sqlite3_finalize(st);
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}

/* The last QR_STORE_MAX_LOG_TAIL bytes of a log, starting on a UTF-8 character boundary. */
static const char *log_tail(const char *t)
{
    size_t n = strlen(t);
    if (n <= QR_STORE_MAX_LOG_TAIL)
        return t;
    const char *p = t + n - QR_STORE_MAX_LOG_TAIL;
    while (*p && ((unsigned char) *p & 0xc0) == 0x80)
        p++;
    return p;
}

static int bind_crash(sqlite3_stmt *st, const void *r)
{
    const struct qr_store_crash *c = r;
    int rc = sqlite3_bind_int64(st, 1, or_now(c->time_ms));
    rc = rc ? rc : bind_text(st, 2, c->backend_id);
    rc = rc ? rc : bind_text(st, 3, c->model);
    rc = rc ? rc : bind_text(st, 4, c->engine_version);
    rc = rc ? rc : sqlite3_bind_int64(st, 5, c->pid);
    rc = rc ? rc : c->signal ? sqlite3_bind_null(st, 6) : sqlite3_bind_int(st, 6, c->exit_code);
    rc = rc ? rc : c->signal ? sqlite3_bind_int(st, 7, c->signal) : sqlite3_bind_null(st, 7);
    rc = rc ? rc : bind_text(st, 8, c->reason);
    rc = rc ? rc : bind_text(st, 9, log_tail(c->log_tail ? c->log_tail : ""));
    return rc;
}

enum qr_err qr_store_crash_add(struct qr_store *s, const struct qr_store_crash *rec,
                               int64_t *out_id, struct qr_diag *diag)
{
    CHECK(check_text(s, "backend_id", rec->backend_id, true, diag));
    CHECK(check_text(s, "model", rec->model, true, diag));
    CHECK(check_text(s, "engine_version", rec->engine_version, true, diag));
    CHECK(check_text(s, "reason", rec->reason, true, diag));
    return write_row(s, "add a crash record",
                     "INSERT INTO engine_crash (time_ms, backend_id, model, engine_version, pid, "
                     "exit_code, signal, reason, log_tail) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                     bind_crash, rec, out_id, diag);
}

static int bind_calibration(sqlite3_stmt *st, const void *r)
{
    const struct qr_store_calibration *c = r;
    int rc = sqlite3_bind_int64(st, 1, or_now(c->time_ms));
    rc = rc ? rc : bind_text(st, 2, c->host_fingerprint);
    rc = rc ? rc : bind_text(st, 3, c->engine_version);
    rc = rc ? rc : bind_text(st, 4, c->model);
    rc = rc ? rc : sqlite3_bind_int(st, 5, c->threads);
    rc = rc ? rc : bind_measure(st, 6, c->prefill_tps);
    rc = rc ? rc : bind_measure(st, 7, c->decode_tps);
    rc = rc ? rc : bind_measure(st, 8, c->mem_bw_gbs);
    rc = rc ? rc : bind_text(st, 9, c->raw_json);
    return rc;
}

enum qr_err qr_store_calibration_add(struct qr_store *s, const struct qr_store_calibration *rec,
                                     int64_t *out_id, struct qr_diag *diag)
{
    CHECK(check_text(s, "host_fingerprint", rec->host_fingerprint, true, diag));
    CHECK(check_text(s, "engine_version", rec->engine_version, true, diag));
    CHECK(check_text(s, "model", rec->model, false, diag));
    CHECK(check_measure(s, "prefill_tps", rec->prefill_tps, diag));
    CHECK(check_measure(s, "decode_tps", rec->decode_tps, diag));
    CHECK(check_measure(s, "mem_bw_gbs", rec->mem_bw_gbs, diag));
    CHECK(check_json(s, "raw_json", rec->raw_json, diag));
    if (rec->threads <= 0) {
        s->last_fault = QR_STORE_FAULT_CONSTRAINT;
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence record: 'threads' must be > 0");
    }
    return write_row(s, "add a calibration run",
                     "INSERT INTO calibration_run (time_ms, host_fingerprint, engine_version, "
                     "model, threads, prefill_tps, decode_tps, mem_bw_gbs, raw_json) VALUES "
                     "(?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                     bind_calibration, rec, out_id, diag);
}

static int bind_conformance(sqlite3_stmt *st, const void *r)
{
    const struct qr_store_conformance *c = r;
    int rc = sqlite3_bind_int64(st, 1, or_now(c->time_ms));
    rc = rc ? rc : bind_text(st, 2, c->backend_id);
    rc = rc ? rc : bind_text(st, 3, c->kind);
    rc = rc ? rc : bind_text(st, 4, c->engine_version);
    rc = rc ? rc : bind_text(st, 5, c->model);
    rc = rc ? rc : bind_text(st, 6, c->hardware_class);
    rc = rc ? rc : sqlite3_bind_int64(st, 7, c->n_pass);
    rc = rc ? rc : sqlite3_bind_int64(st, 8, c->n_fail);
    rc = rc ? rc : sqlite3_bind_int64(st, 9, c->n_skip);
    rc = rc ? rc : bind_text(st, 10, c->report_json);
    return rc;
}

enum qr_err qr_store_conformance_add(struct qr_store *s, const struct qr_store_conformance *rec,
                                     int64_t *out_id, struct qr_diag *diag)
{
    CHECK(check_text(s, "backend_id", rec->backend_id, true, diag));
    CHECK(check_text(s, "kind", rec->kind, true, diag));
    CHECK(check_text(s, "engine_version", rec->engine_version, true, diag));
    CHECK(check_text(s, "model", rec->model, true, diag));
    CHECK(check_text(s, "hardware_class", rec->hardware_class, true, diag));
    CHECK(check_json(s, "report_json", rec->report_json, diag));
    if (rec->n_pass < 0 || rec->n_fail < 0 || rec->n_skip < 0) {
        s->last_fault = QR_STORE_FAULT_CONSTRAINT;
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence record: case counts must be >= 0");
    }
    return write_row(s, "add a conformance run",
                     "INSERT INTO conformance_run (time_ms, backend_id, kind, engine_version, "
                     "model, hardware_class, n_pass, n_fail, n_skip, report_json) VALUES "
                     "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
                     bind_conformance, rec, out_id, diag);
}

static int bind_bench(sqlite3_stmt *st, const void *r)
{
    const struct qr_store_bench *b = r;
    int rc = sqlite3_bind_int64(st, 1, or_now(b->time_ms));
    rc = rc ? rc : bind_text(st, 2, b->name);
    rc = rc ? rc : bind_text(st, 3, b->model);
    rc = rc ? rc : bind_text(st, 4, b->variant_a);
    rc = rc ? rc : bind_text(st, 5, b->variant_b);
    rc = rc ? rc : bind_text(st, 6, b->metric);
    rc = rc ? rc : bind_text(st, 7, b->values_json);
    return rc;
}

enum qr_err qr_store_bench_add(struct qr_store *s, const struct qr_store_bench *rec,
                               int64_t *out_id, struct qr_diag *diag)
{
    CHECK(check_text(s, "name", rec->name, true, diag));
    CHECK(check_text(s, "model", rec->model, false, diag));
    CHECK(check_text(s, "variant_a", rec->variant_a, true, diag));
    CHECK(check_text(s, "variant_b", rec->variant_b, true, diag));
    CHECK(check_text(s, "metric", rec->metric, true, diag));
    CHECK(check_json(s, "values_json", rec->values_json, diag));
    return write_row(s, "add a benchmark result",
                     "INSERT INTO bench_ab (time_ms, name, model, variant_a, variant_b, metric, "
                     "values_json) VALUES (?1,?2,?3,?4,?5,?6,?7)",
                     bind_bench, rec, out_id, diag);
}

static int bind_evidence(sqlite3_stmt *st, const void *r)
{
    const struct qr_store_evidence *e = r;
    int rc = sqlite3_bind_int64(st, 1, or_now(e->time_ms));
    rc = rc ? rc : bind_text(st, 2, e->backend_id);
    rc = rc ? rc : bind_text(st, 3, e->model);
    rc = rc ? rc : bind_text(st, 4, e->artifact);
    rc = rc ? rc : bind_text(st, 5, e->engine_version);
    rc = rc ? rc : sqlite3_bind_int(st, 6, e->supports_tools);
    rc = rc ? rc : sqlite3_bind_int(st, 7, e->supports_parallel_tool_calls);
    rc = rc ? rc : sqlite3_bind_int(st, 8, e->supports_system_role);
    rc = rc ? rc : sqlite3_bind_int(st, 9, e->vision);
    rc = rc ? rc : sqlite3_bind_int(st, 10, e->audio);
    rc = rc ? rc : sqlite3_bind_int64(st, 11, e->n_ctx_slot);
    rc = rc ? rc : bind_text(st, 12, e->build_info ? e->build_info : "");
    rc = rc ? rc : bind_text(st, 13, e->facts_json);
    return rc;
}

enum qr_err qr_store_evidence_add(struct qr_store *s, const struct qr_store_evidence *rec,
                                  int64_t *out_id, struct qr_diag *diag)
{
    CHECK(check_text(s, "backend_id", rec->backend_id, true, diag));
    CHECK(check_text(s, "model", rec->model, true, diag));
    CHECK(check_text(s, "artifact", rec->artifact, true, diag));
    CHECK(check_text(s, "engine_version", rec->engine_version, true, diag));
    CHECK(check_text(s, "build_info", rec->build_info, false, diag));
    CHECK(check_json(s, "facts_json", rec->facts_json, diag));
    if (rec->n_ctx_slot <= 0) {
        s->last_fault = QR_STORE_FAULT_CONSTRAINT;
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence record: 'n_ctx_slot' must be > 0");
    }
    return write_row(s, "add an engine evidence record",
                     "INSERT INTO engine_evidence (time_ms, backend_id, model, artifact, "
                     "engine_version, supports_tools, supports_parallel_tool_calls, "
                     "supports_system_role, vision, audio, n_ctx_slot, build_info, facts_json) "
                     "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
                     bind_evidence, rec, out_id, diag);
}

/* --- reads -------------------------------------------------------------------------------- */

/* Filter fields by bit; every list SQL uses the same parameter numbers:
 * ?1 backend_id ?2 model ?3 engine_version ?4 host_fingerprint ?5 kind ?6 name ?7 since ?8 limit */
enum {
    F_BACKEND = 1u << 0,
    F_MODEL = 1u << 1,
    F_ENGINE = 1u << 2,
    F_HOST = 1u << 3,
    F_KIND = 1u << 4,
    F_NAME = 1u << 5,
};

#define WHERE_CLAUSE(extra)                                                                        \
    " WHERE (?1 IS NULL OR backend_id = ?1) AND (?2 IS NULL OR model = ?2) AND"                    \
    " (?3 IS NULL OR engine_version = ?3) AND " extra " time_ms >= ?7"                             \
    " ORDER BY time_ms DESC, id DESC LIMIT ?8"

typedef enum qr_err (*row_fn)(sqlite3_stmt *st, struct qr_arena *a, void *out_row);

struct list_spec {
    const char *what;
    const char *table; /* for the message */
    unsigned allowed;  /* F_* */
    const char *sql;
    size_t row_size;
    row_fn read;
};

static enum qr_err check_filter(struct qr_store *s, const struct list_spec *spec,
                                const struct qr_store_filter *f, struct qr_diag *diag)
{
    const struct {
        unsigned bit;
        const char *name;
        const char *v;
    } fields[] = {
        {F_BACKEND, "backend_id", f->backend_id},
        {F_MODEL, "model", f->model},
        {F_ENGINE, "engine_version", f->engine_version},
        {F_HOST, "host_fingerprint", f->host_fingerprint},
        {F_KIND, "kind", f->kind},
        {F_NAME, "name", f->name},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(fields); i++)
        if (fields[i].v && !(spec->allowed & fields[i].bit)) {
            s->last_fault = QR_STORE_FAULT_CONSTRAINT;
            return qr_diag_set(diag, QR_ERR_INVALID,
                               "evidence store: filter field '%s' does not apply to %s",
                               fields[i].name, spec->table);
        }
    return QR_OK;
}

static int bind_filter(sqlite3_stmt *st, const struct qr_store_filter *f)
{
    size_t limit = f->limit && f->limit <= QR_STORE_MAX_ROWS ? f->limit : QR_STORE_MAX_ROWS;
    int rc = bind_text(st, 1, f->backend_id);
    rc = rc ? rc : bind_text(st, 2, f->model);
    rc = rc ? rc : bind_text(st, 3, f->engine_version);
    rc = rc ? rc : bind_text(st, 4, f->host_fingerprint);
    rc = rc ? rc : bind_text(st, 5, f->kind);
    rc = rc ? rc : bind_text(st, 6, f->name);
    rc = rc ? rc : sqlite3_bind_int64(st, 7, f->since_ms);
    rc = rc ? rc : sqlite3_bind_int64(st, 8, (int64_t) limit);
    return rc;
}

/* Run spec's query and collect its rows into an arena array that doubles as it fills. */
static enum qr_err list_rows(struct qr_store *s, const struct list_spec *spec,
                             const struct qr_store_filter *f, struct qr_arena *a, void **out,
                             size_t *out_n, struct qr_diag *diag)
{
    static const struct qr_store_filter all;
    f = f ? f : &all;
    *out = NULL;
    *out_n = 0;
    CHECK(check_filter(s, spec, f, diag));
    sqlite3_stmt *st = NULL;
    char *rows = NULL;
    size_t n = 0, cap = 0;
    enum qr_err err = QR_OK;
    int rc = sqlite3_prepare_v2(s->db, spec->sql, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = bind_filter(st, f);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char *grown = qr_arena_array(a, ncap, spec->row_size);
            if (!grown) {
                err = qr_diag_set(diag, QR_ERR_NOMEM,
                                  "evidence store '%s': cannot %s: arena "
                                  "full",
                                  s->path, spec->what);
                goto fail;
            }
            if (n)
                memcpy(grown, rows, n * spec->row_size);
            rows = grown;
            cap = ncap;
        }
        err = spec->read(st, a, rows + n * spec->row_size);
        if (err) {
            qr_diag_set(diag, err, "evidence store '%s': cannot %s: arena full", s->path,
                        spec->what);
            goto fail;
        }
        n++;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE) {
        err = fail_rc(s, rc, spec->what, diag);
        goto fail;
    }
    sqlite3_finalize(st);
    *out = rows;
    *out_n = n;
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;

fail:
    if (err == QR_ERR_NOMEM)
        s->last_fault = QR_STORE_FAULT_OTHER;
    sqlite3_finalize(st);
    return err;
}

/* Column i as an arena string; NULL for SQL NULL. *ok is cleared when the arena is full. */
static const char *col_text(sqlite3_stmt *st, int i, struct qr_arena *a, bool *ok)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    if (!t)
        return NULL;
    struct qr_slice d = qr_arena_dup(a, (const char *) t, (size_t) sqlite3_column_bytes(st, i));
    if (!d.ptr)
        *ok = false;
    return d.ptr;
}

static double col_measure(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static enum qr_err read_crash(sqlite3_stmt *st, struct qr_arena *a, void *out)
{
    struct qr_store_crash *c = out;
    bool ok = true;
    c->id = sqlite3_column_int64(st, 0);
    c->time_ms = sqlite3_column_int64(st, 1);
    c->backend_id = col_text(st, 2, a, &ok);
    c->model = col_text(st, 3, a, &ok);
    c->engine_version = col_text(st, 4, a, &ok);
    c->pid = sqlite3_column_int64(st, 5);
    c->exit_code = sqlite3_column_int(st, 6);
    c->signal = sqlite3_column_int(st, 7);
    c->reason = col_text(st, 8, a, &ok);
    c->log_tail = col_text(st, 9, a, &ok);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

static enum qr_err read_calibration(sqlite3_stmt *st, struct qr_arena *a, void *out)
{
    struct qr_store_calibration *c = out;
    bool ok = true;
    c->id = sqlite3_column_int64(st, 0);
    c->time_ms = sqlite3_column_int64(st, 1);
    c->host_fingerprint = col_text(st, 2, a, &ok);
    c->engine_version = col_text(st, 3, a, &ok);
    c->model = col_text(st, 4, a, &ok);
    c->threads = sqlite3_column_int(st, 5);
    c->prefill_tps = col_measure(st, 6);
    c->decode_tps = col_measure(st, 7);
    c->mem_bw_gbs = col_measure(st, 8);
    c->raw_json = col_text(st, 9, a, &ok);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

static enum qr_err read_conformance(sqlite3_stmt *st, struct qr_arena *a, void *out)
{
    struct qr_store_conformance *c = out;
    bool ok = true;
    c->id = sqlite3_column_int64(st, 0);
    c->time_ms = sqlite3_column_int64(st, 1);
    c->backend_id = col_text(st, 2, a, &ok);
    c->kind = col_text(st, 3, a, &ok);
    c->engine_version = col_text(st, 4, a, &ok);
    c->model = col_text(st, 5, a, &ok);
    c->hardware_class = col_text(st, 6, a, &ok);
    c->n_pass = sqlite3_column_int64(st, 7);
    c->n_fail = sqlite3_column_int64(st, 8);
    c->n_skip = sqlite3_column_int64(st, 9);
    c->report_json = col_text(st, 10, a, &ok);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

static enum qr_err read_bench(sqlite3_stmt *st, struct qr_arena *a, void *out)
{
    struct qr_store_bench *b = out;
    bool ok = true;
    b->id = sqlite3_column_int64(st, 0);
    b->time_ms = sqlite3_column_int64(st, 1);
    b->name = col_text(st, 2, a, &ok);
    b->model = col_text(st, 3, a, &ok);
    b->variant_a = col_text(st, 4, a, &ok);
    b->variant_b = col_text(st, 5, a, &ok);
    b->metric = col_text(st, 6, a, &ok);
    b->values_json = col_text(st, 7, a, &ok);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

static enum qr_err read_evidence(sqlite3_stmt *st, struct qr_arena *a, void *out)
{
    struct qr_store_evidence *e = out;
    bool ok = true;
    e->id = sqlite3_column_int64(st, 0);
    e->time_ms = sqlite3_column_int64(st, 1);
    e->backend_id = col_text(st, 2, a, &ok);
    e->model = col_text(st, 3, a, &ok);
    e->artifact = col_text(st, 4, a, &ok);
    e->engine_version = col_text(st, 5, a, &ok);
    e->supports_tools = sqlite3_column_int(st, 6) != 0;
    e->supports_parallel_tool_calls = sqlite3_column_int(st, 7) != 0;
    e->supports_system_role = sqlite3_column_int(st, 8) != 0;
    e->vision = sqlite3_column_int(st, 9) != 0;
    e->audio = sqlite3_column_int(st, 10) != 0;
    e->n_ctx_slot = sqlite3_column_int64(st, 11);
    e->build_info = col_text(st, 12, a, &ok);
    e->facts_json = col_text(st, 13, a, &ok);
    e->observations = sqlite3_column_int64(st, 14);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

/* Tables without a backend_id/engine_version column select NULL under that name so that the
 * shared WHERE clause stays valid; check_filter refuses a filter on such a column. */
static const struct list_spec crash_spec = {
    "list crash records",
    "crash records",
    F_BACKEND | F_MODEL | F_ENGINE,
    "SELECT id, time_ms, backend_id, model, engine_version, pid, exit_code, signal, reason, "
    "log_tail FROM engine_crash" WHERE_CLAUSE(""),
    sizeof(struct qr_store_crash),
    read_crash};

static const struct list_spec calibration_spec = {
    "list calibration runs",
    "calibration runs",
    F_MODEL | F_ENGINE | F_HOST,
    "SELECT * FROM (SELECT id, time_ms, host_fingerprint, engine_version, model, threads, "
    "prefill_tps, decode_tps, mem_bw_gbs, raw_json, NULL AS backend_id FROM "
    "calibration_run)" WHERE_CLAUSE("(?4 IS NULL OR host_fingerprint = ?4) AND"),
    sizeof(struct qr_store_calibration),
    read_calibration};

static const struct list_spec conformance_spec = {
    "list conformance runs",
    "conformance runs",
    F_BACKEND | F_MODEL | F_ENGINE | F_KIND,
    "SELECT id, time_ms, backend_id, kind, engine_version, model, hardware_class, n_pass, n_fail, "
    "n_skip, report_json FROM conformance_run" WHERE_CLAUSE("(?5 IS NULL OR kind = ?5) AND"),
    sizeof(struct qr_store_conformance),
    read_conformance};

static const struct list_spec bench_spec = {
    "list benchmark results",
    "benchmark results",
    F_MODEL | F_NAME,
    "SELECT * FROM (SELECT id, time_ms, name, model, variant_a, variant_b, metric, values_json, "
    "NULL AS backend_id, NULL AS engine_version FROM bench_ab)" WHERE_CLAUSE(
        "(?6 IS NULL OR name = ?6) AND"),
    sizeof(struct qr_store_bench),
    read_bench};

#define EVIDENCE_COLUMNS                                                                           \
    "id, time_ms, backend_id, model, artifact, engine_version, supports_tools, "                   \
    "supports_parallel_tool_calls, supports_system_role, vision, audio, n_ctx_slot, build_info, "  \
    "facts_json"

static const struct list_spec evidence_spec = {
    "list engine evidence",
    "engine evidence",
    F_BACKEND | F_MODEL | F_ENGINE,
    "SELECT " EVIDENCE_COLUMNS ", 0 AS observations FROM engine_evidence" WHERE_CLAUSE(""),
    sizeof(struct qr_store_evidence),
    read_evidence};

/* The newest row of each key (the largest id: ids grow with every insert) with the key's count,
 * in one pass over the table (GROUP BY); since_ms (?7) applies inside, so both describe the same
 * rows, and the shared WHERE clause filters the keys outside. */
static const struct list_spec evidence_latest_spec = {
    "list the latest engine evidence",
    "engine evidence",
    F_BACKEND | F_MODEL | F_ENGINE,
    "SELECT * FROM (SELECT " EVIDENCE_COLUMNS ", g.n AS observations FROM engine_evidence e JOIN "
    "(SELECT max(id) AS last, count(*) AS n FROM engine_evidence WHERE time_ms >= ?7 GROUP BY "
    "backend_id, model, artifact, engine_version) g ON e.id = g.last)" WHERE_CLAUSE(""),
    sizeof(struct qr_store_evidence),
    read_evidence};

enum qr_err qr_store_evidence_list(struct qr_store *s, const struct qr_store_filter *f,
                                   struct qr_arena *a, struct qr_store_evidence **out,
                                   size_t *out_n, struct qr_diag *diag)
{
    return list_rows(s, &evidence_spec, f, a, (void **) out, out_n, diag);
}

enum qr_err qr_store_evidence_latest(struct qr_store *s, const struct qr_store_filter *f,
                                     struct qr_arena *a, struct qr_store_evidence **out,
                                     size_t *out_n, struct qr_diag *diag)
{
    return list_rows(s, &evidence_latest_spec, f, a, (void **) out, out_n, diag);
}

enum qr_err qr_store_crash_count(struct qr_store *s, const struct qr_store_filter *f,
                                 int64_t *out_n, struct qr_diag *diag)
{
    static const struct qr_store_filter all;
    f = f ? f : &all;
    *out_n = 0;
    CHECK(check_filter(s, &crash_spec, f, diag));
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT count(*) FROM engine_crash WHERE (?1 IS NULL OR "
                                "backend_id = ?1) AND (?2 IS NULL OR model = ?2) AND (?3 IS NULL "
                                "OR engine_version = ?3) AND time_ms >= ?4",
                                -1, &st, NULL);
    rc = rc ? rc : bind_text(st, 1, f->backend_id);
    rc = rc ? rc : bind_text(st, 2, f->model);
    rc = rc ? rc : bind_text(st, 3, f->engine_version);
    rc = rc ? rc : sqlite3_bind_int64(st, 4, f->since_ms);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *out_n = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "count crash records", diag);
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;
}

enum qr_err qr_store_crash_list(struct qr_store *s, const struct qr_store_filter *f,
                                struct qr_arena *a, struct qr_store_crash **out, size_t *out_n,
                                struct qr_diag *diag)
{
    return list_rows(s, &crash_spec, f, a, (void **) out, out_n, diag);
}

enum qr_err qr_store_calibration_list(struct qr_store *s, const struct qr_store_filter *f,
                                      struct qr_arena *a, struct qr_store_calibration **out,
                                      size_t *out_n, struct qr_diag *diag)
{
    return list_rows(s, &calibration_spec, f, a, (void **) out, out_n, diag);
}

enum qr_err qr_store_conformance_list(struct qr_store *s, const struct qr_store_filter *f,
                                      struct qr_arena *a, struct qr_store_conformance **out,
                                      size_t *out_n, struct qr_diag *diag)
{
    return list_rows(s, &conformance_spec, f, a, (void **) out, out_n, diag);
}

enum qr_err qr_store_bench_list(struct qr_store *s, const struct qr_store_filter *f,
                                struct qr_arena *a, struct qr_store_bench **out, size_t *out_n,
                                struct qr_diag *diag)
{
    return list_rows(s, &bench_spec, f, a, (void **) out, out_n, diag);
}

/* --- operations --------------------------------------------------------------------------- */

static int64_t file_size(const char *path, const char *suffix)
{
    char p[4096 + 16];
    snprintf(p, sizeof(p), "%s%s", path, suffix);
    struct stat st;
    return stat(p, &st) == 0 ? (int64_t) st.st_size : 0;
}

enum qr_err qr_store_stats(struct qr_store *s, struct qr_store_stats *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof(*out));
    int64_t v = 0;
    int rc = query1(s->db, "SELECT coalesce(max(version), 0) FROM schema_version", &v, NULL, 0);
    rc = rc ? rc : query1(s->db, "SELECT count(*) FROM engine_crash", &out->crashes, NULL, 0);
    rc = rc ? rc
            : query1(s->db, "SELECT count(*) FROM calibration_run", &out->calibrations, NULL, 0);
    rc =
        rc ? rc
           : query1(s->db, "SELECT count(*) FROM conformance_run", &out->conformance_runs, NULL, 0);
    rc = rc ? rc : query1(s->db, "SELECT count(*) FROM bench_ab", &out->bench_results, NULL, 0);
    rc = rc ? rc : query1(s->db, "SELECT count(*) FROM engine_evidence", &out->evidence, NULL, 0);
    rc = rc ? rc : query1(s->db, "PRAGMA page_size", &out->page_size, NULL, 0);
    rc = rc ? rc : query1(s->db, "PRAGMA page_count", &out->page_count, NULL, 0);
    rc = rc ? rc : query1(s->db, "PRAGMA freelist_count", &out->free_pages, NULL, 0);
    int64_t sync = 0;
    rc = rc ? rc : query1(s->db, "PRAGMA synchronous", &sync, NULL, 0);
    rc = rc ? rc
            : query1(s->db, "PRAGMA journal_mode", NULL, out->journal_mode,
                     sizeof(out->journal_mode));
    out->synchronous = (int) sync;
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "read statistics", diag);
    out->schema_version = (int) v;
    out->db_bytes = file_size(s->path, "");
    out->wal_bytes = file_size(s->path, "-wal");
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;
}

enum qr_err qr_store_backup(struct qr_store *s, const char *dest_path, struct qr_diag *diag)
{
    if (!dest_path || !*dest_path || access(dest_path, F_OK) == 0) {
        s->last_fault = QR_STORE_FAULT_CONSTRAINT;
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "evidence store backup: '%s' is empty or already exists",
                           dest_path ? dest_path : "");
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "VACUUM INTO ?1", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, dest_path, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "write a backup", diag);
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;
}

enum qr_err qr_store_check(struct qr_store *s, struct qr_diag *diag)
{
    char verdict[256];
    int rc = query1(s->db, "PRAGMA integrity_check(1)", NULL, verdict, sizeof(verdict));
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "check integrity", diag);
    if (strcmp(verdict, "ok") != 0)
        return fail_fault(s, QR_STORE_FAULT_CORRUPT, QR_ERR_INVALID, diag,
                          "corrupt: integrity_check says ", verdict);
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;
}

enum qr_err qr_store_limit_pages(struct qr_store *s, int64_t max_pages, int64_t *out_pages,
                                 struct qr_diag *diag)
{
    if (max_pages < 0) {
        s->last_fault = QR_STORE_FAULT_CONSTRAINT;
        return qr_diag_set(diag, QR_ERR_INVALID, "evidence store: max_pages must be >= 0");
    }
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld",
             (long long) (max_pages ? max_pages : s->default_max_pages));
    int64_t now = 0;
    int rc = query1(s->db, sql, &now, NULL, 0);
    if (rc != SQLITE_OK)
        return fail_rc(s, rc, "set max_page_count", diag);
    if (out_pages)
        *out_pages = now;
    s->last_fault = QR_STORE_FAULT_NONE;
    return QR_OK;
}
