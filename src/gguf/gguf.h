/* GGUF: the model file format of llama.cpp/ggml. Definitions shared by the hardened reader
 * (reader.c) and the writer (writer.c), and both APIs.
 *
 * Layout of a GGUF v2/v3 file (all integers little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x   { str key | u32 value type | value }
 *   n_tensors x { str name | u32 n_dims | u64 dims[n_dims] | u32 ggml type | u64 offset }
 *   padding to general.alignment (default 32) | tensor data (offsets relative to here)
 * where str = u64 length + bytes (no NUL) and an array value = u32 element type + u64 count +
 * elements.
 *
 * Reader contract (details in reader.c): every read is checked against the bytes remaining; every
 * count and length is checked against struct qr_gguf_limits and against what the remaining bytes
 * can hold BEFORE anything is allocated; products and sums are overflow-checked; unknown value
 * types, unknown or removed tensor types, nested arrays, duplicate keys, duplicate tensor names,
 * zero or more than 4 dims, misaligned, out-of-bounds or overlapping tensor data are rejected.
 * Keys and tensor names must be non-empty printable ASCII (0x20..0x7e); string values are kept as
 * raw bytes and not validated (tokenizer vocabularies hold arbitrary bytes). Nothing is copied out
 * of the file: keys, values and names are views into the mapping, valid until qr_gguf_close().
 * Memory after open is O(n_kv + n_tensors), independent of array lengths (vocabulary size). */
#ifndef QR_GGUF_GGUF_H
#define QR_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"

#define QR_GGUF_MAGIC             "GGUF"
#define QR_GGUF_VERSION           3u         /* what the writer emits; the reader takes 2 and 3 */
#define QR_GGUF_DEFAULT_ALIGNMENT 32u        /* when general.alignment is absent */
#define QR_GGUF_MAX_ALIGNMENT     (1u << 20) /* general.alignment must be a power of two <= this */
#define QR_GGUF_MAX_DIMS          4u
#define QR_GGUF_KEY_ALIGNMENT     "general.alignment"

/* GGUF metadata value types (the on-disk u32 ids). */
enum qr_gguf_type {
    QR_GGUF_U8 = 0,
    QR_GGUF_I8 = 1,
    QR_GGUF_U16 = 2,
    QR_GGUF_I16 = 3,
    QR_GGUF_U32 = 4,
    QR_GGUF_I32 = 5,
    QR_GGUF_F32 = 6,
    QR_GGUF_BOOL = 7, /* one byte; any non-zero byte reads as true */
    QR_GGUF_STR = 8,
    QR_GGUF_ARR = 9,
    QR_GGUF_U64 = 10,
    QR_GGUF_I64 = 11,
    QR_GGUF_F64 = 12,
    QR_GGUF_TYPE_COUNT = 13
};

/* Size in bytes of one value of a fixed-size type; 0 for STR, ARR and ids >= QR_GGUF_TYPE_COUNT. */
size_t qr_gguf_type_size(uint32_t type);

/* Static lowercase name ("u32", "string", "array"), or "invalid". Never NULL. */
const char *qr_gguf_type_name(uint32_t type);

/* ggml tensor types (the on-disk u32 ids) as of ggml's current enum (0.27; the test
 * engine_ggml_types checks ids, names and block geometry against the installed engine's library).
 * Ids that ggml removed from GGUF files (4, 5, 31..33, 36..38) are listed as QR_GGML_REMOVED_* and
 * are invalid. */
enum qr_ggml_type {
    QR_GGML_F32 = 0,
    QR_GGML_F16 = 1,
    QR_GGML_Q4_0 = 2,
    QR_GGML_Q4_1 = 3,
    QR_GGML_REMOVED_Q4_2 = 4,
    QR_GGML_REMOVED_Q4_3 = 5,
    QR_GGML_Q5_0 = 6,
    QR_GGML_Q5_1 = 7,
    QR_GGML_Q8_0 = 8,
    QR_GGML_Q8_1 = 9,
    QR_GGML_Q2_K = 10,
    QR_GGML_Q3_K = 11,
    QR_GGML_Q4_K = 12,
    QR_GGML_Q5_K = 13,
    QR_GGML_Q6_K = 14,
    QR_GGML_Q8_K = 15,
    QR_GGML_IQ2_XXS = 16,
    QR_GGML_IQ2_XS = 17,
    QR_GGML_IQ3_XXS = 18,
    QR_GGML_IQ1_S = 19,
    QR_GGML_IQ4_NL = 20,
    QR_GGML_IQ3_S = 21,
    QR_GGML_IQ2_S = 22,
    QR_GGML_IQ4_XS = 23,
    QR_GGML_I8 = 24,
    QR_GGML_I16 = 25,
    QR_GGML_I32 = 26,
    QR_GGML_I64 = 27,
    QR_GGML_F64 = 28,
    QR_GGML_IQ1_M = 29,
    QR_GGML_BF16 = 30,
    QR_GGML_REMOVED_Q4_0_4_4 = 31,
    QR_GGML_REMOVED_Q4_0_4_8 = 32,
    QR_GGML_REMOVED_Q4_0_8_8 = 33,
    QR_GGML_TQ1_0 = 34,
    QR_GGML_TQ2_0 = 35,
    QR_GGML_REMOVED_IQ4_NL_4_4 = 36,
    QR_GGML_REMOVED_IQ4_NL_4_8 = 37,
    QR_GGML_REMOVED_IQ4_NL_8_8 = 38,
    QR_GGML_MXFP4 = 39,
    QR_GGML_NVFP4 = 40,
    QR_GGML_Q1_0 = 41,
    QR_GGML_Q2_0 = 42,
    QR_GGML_TYPE_COUNT = 43
};

/* Block geometry of a ggml type: blck elements are stored in bytes bytes. */
struct qr_ggml_type_info {
    const char *name; /* static, lowercase as ggml names it ("q4_K", "f16") */
    uint32_t blck;    /* elements per block (1 for plain types) */
    uint32_t bytes;   /* bytes per block */
};

/* Geometry of a valid type id; NULL for removed ids and ids >= QR_GGML_TYPE_COUNT. Borrowed,
 * static. */
const struct qr_ggml_type_info *qr_ggml_type_get(uint32_t type);

/* Bytes of a tensor of this type and shape into *out: every dim >= 1, n_dims 1..4, dims[0] a
 * multiple of the block size, element count and byte count without 64-bit overflow. Otherwise
 * QR_ERR_INVALID (bad type, shape or divisibility) or QR_ERR_TOO_LARGE (overflow). */
enum qr_err qr_ggml_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *dims, uint64_t *out);

/* ---------------------------------------------------------------------------------------------
 * Reader */

/* Caps applied before allocating; qr_gguf_limits_default() gives the values in reader.c. A
 * count or length past its cap gives QR_ERR_TOO_LARGE. */
struct qr_gguf_limits {
    uint64_t max_kv;       /* metadata keys (default 65,536) */
    uint64_t max_tensors;  /* tensor infos (default 262,144) */
    uint64_t max_key_len;  /* bytes of a key (default 65,535, the spec's limit) */
    uint64_t max_name_len; /* bytes of a tensor name (default 64, the spec's limit) */
    uint64_t max_str_len;  /* bytes of one string value or array element (default 16 MiB) */
    uint64_t max_arr_len;  /* elements of one array (default 16,777,216) */
};

void qr_gguf_limits_default(struct qr_gguf_limits *out);

/* One metadata entry; all pointers are views into the file, valid until qr_gguf_close(). */
struct qr_gguf_kv {
    struct qr_slice key;        /* printable ASCII, not NUL-terminated */
    enum qr_gguf_type type;     /* value type */
    enum qr_gguf_type arr_type; /* element type when type == QR_GGUF_ARR (never ARR) */
    uint64_t arr_len;           /* elements when type == QR_GGUF_ARR, else 0 */
    const uint8_t *val;         /* value bytes (for arrays: the first element) */
    uint64_t val_len;           /* bytes of the value (strings: without the length prefix) */
    uint64_t file_offset;       /* file offset of the entry (its key length field) */
};

/* One tensor info; name is a view into the file, data points into the mapping. */
struct qr_gguf_tensor {
    struct qr_slice name;            /* printable ASCII, not NUL-terminated */
    uint32_t type;                   /* a valid enum qr_ggml_type */
    uint32_t n_dims;                 /* 1..4 */
    uint64_t dims[QR_GGUF_MAX_DIMS]; /* ggml order, ne0 first; unused dims are 1 */
    uint64_t n_elements;
    uint64_t offset;      /* relative to the data section, aligned */
    uint64_t file_offset; /* absolute offset of the data in the file */
    uint64_t bytes;       /* blocks * bytes per block */
    const uint8_t *data;  /* borrowed: bytes bytes in the mapping */
};

struct qr_gguf; /* an open file: the mapping, the key index and the tensor table */

/* Map the file at path read-only and parse and check its header, metadata and tensor table.
 * limits NULL means the defaults. On success *out is owned by the caller (qr_gguf_close). On
 * failure returns QR_ERR_IO / QR_ERR_NOT_FOUND (cannot open or map), QR_ERR_PARSE (malformed),
 * QR_ERR_TOO_LARGE (a cap), QR_ERR_NOMEM; diag reads "cannot open 'PATH': STAGE [offset 0xN]:
 * what", STAGE being header, kv N 'key', tensor info N 'name', tensor 'name' data or data section.
 * Tensor data is never read. */
enum qr_err qr_gguf_open(const char *path, const struct qr_gguf_limits *limits,
                         struct qr_diag *diag, struct qr_gguf **out);

/* The same over caller memory (borrowed: it must outlive the handle). name is used in messages
 * only (NULL: "<memory>"). */
enum qr_err qr_gguf_open_mem(const void *ptr, size_t len, const char *name,
                             const struct qr_gguf_limits *limits, struct qr_diag *diag,
                             struct qr_gguf **out);

/* Unmap (when qr_gguf_open mapped it) and free. NULL is fine. */
void qr_gguf_close(struct qr_gguf *g);

uint32_t qr_gguf_version(const struct qr_gguf *g);
uint32_t qr_gguf_alignment(const struct qr_gguf *g);
uint64_t qr_gguf_data_offset(const struct qr_gguf *g); /* file offset of the data section */
uint64_t qr_gguf_file_size(const struct qr_gguf *g);
uint64_t qr_gguf_data_bytes(const struct qr_gguf *g); /* sum of all tensors' bytes */

/* Keys in file order: i < qr_gguf_kv_count(g). Borrowed. */
size_t qr_gguf_kv_count(const struct qr_gguf *g);
const struct qr_gguf_kv *qr_gguf_kv_at(const struct qr_gguf *g, size_t i);

/* O(1) lookup by key (NUL-terminated); borrowed entry or NULL. */
const struct qr_gguf_kv *qr_gguf_find(const struct qr_gguf *g, const char *key);

/* Typed getters by key. QR_ERR_NOT_FOUND when the key is absent, QR_ERR_INVALID when its type
 * does not convert. Conversions: the integer getters accept any integer value type (u8..i64)
 * whose value fits the target exactly (a negative i32 never reads as u32, a u64 above INT64_MAX
 * never as i64); get_f64 accepts F32 and F64, get_f32 only F32; get_bool only BOOL; get_str only
 * STR (the slice is a view into the file, not NUL-terminated, bytes not validated). */
enum qr_err qr_gguf_get_u32(const struct qr_gguf *g, const char *key, uint32_t *out);
enum qr_err qr_gguf_get_u64(const struct qr_gguf *g, const char *key, uint64_t *out);
enum qr_err qr_gguf_get_i32(const struct qr_gguf *g, const char *key, int32_t *out);
enum qr_err qr_gguf_get_i64(const struct qr_gguf *g, const char *key, int64_t *out);
enum qr_err qr_gguf_get_f32(const struct qr_gguf *g, const char *key, float *out);
enum qr_err qr_gguf_get_f64(const struct qr_gguf *g, const char *key, double *out);
enum qr_err qr_gguf_get_bool(const struct qr_gguf *g, const char *key, bool *out);
enum qr_err qr_gguf_get_str(const struct qr_gguf *g, const char *key, struct qr_slice *out);

/* The same conversions on an entry already found (scalar values only). */
enum qr_err qr_gguf_kv_i64(const struct qr_gguf_kv *kv, int64_t *out);
enum qr_err qr_gguf_kv_u64(const struct qr_gguf_kv *kv, uint64_t *out);
enum qr_err qr_gguf_kv_f64(const struct qr_gguf_kv *kv, double *out);

/* Arrays, read lazily from the mapping. qr_gguf_arr_len is 0 for a non-array. Indexed access is
 * O(1) for fixed-size elements and O(i) for strings; the iterator walks strings in O(n) total.
 * Integer/float element getters follow the scalar conversion rules above; QR_ERR_INVALID for a
 * wrong element type, QR_ERR_NOT_FOUND for i >= length. */
uint64_t qr_gguf_arr_len(const struct qr_gguf_kv *kv);
enum qr_err qr_gguf_arr_i64_at(const struct qr_gguf_kv *kv, uint64_t i, int64_t *out);
enum qr_err qr_gguf_arr_u64_at(const struct qr_gguf_kv *kv, uint64_t i, uint64_t *out);
enum qr_err qr_gguf_arr_f64_at(const struct qr_gguf_kv *kv, uint64_t i, double *out);
enum qr_err qr_gguf_arr_str_at(const struct qr_gguf_kv *kv, uint64_t i, struct qr_slice *out);

/* Iterator over a string array in caller storage; owns nothing. */
struct qr_gguf_arr_iter {
    const uint8_t *p; /* next element */
    uint64_t i, n;    /* index of the next element, element count (0 for a non-string array) */
};
void qr_gguf_arr_iter_init(const struct qr_gguf_kv *kv, struct qr_gguf_arr_iter *it);
/* Next string into *out (a view); false at the end. */
bool qr_gguf_arr_iter_next(struct qr_gguf_arr_iter *it, struct qr_slice *out);

/* Tensors in file order: i < qr_gguf_tensor_count(g). Borrowed. */
size_t qr_gguf_tensor_count(const struct qr_gguf *g);
const struct qr_gguf_tensor *qr_gguf_tensor_at(const struct qr_gguf *g, size_t i);
/* O(1) lookup by name; borrowed or NULL. */
const struct qr_gguf_tensor *qr_gguf_find_tensor(const struct qr_gguf *g, const char *name);

/* ---------------------------------------------------------------------------------------------
 * Writer: builds a GGUF v3 file in memory. Errors are sticky: the first failing add records its
 * error and message, later adds are no-ops, and finish/write_file return it. Keys and names must
 * be non-empty printable ASCII within the reader's default limits; duplicates are rejected at
 * finish. Adding general.alignment (u32, power of two <= 1 MiB) sets the alignment used. */

struct qr_gguf_writer;

/* Owned by the caller (qr_gguf_writer_free). Aborts on OOM (small internal allocation). */
struct qr_gguf_writer *qr_gguf_writer_new(void);
void qr_gguf_writer_free(struct qr_gguf_writer *w);

/* Scalars: val points to one host value of the C type matching type (uint8_t for U8 and BOOL,
 * float for F32, ...). Strings: qr_gguf_writer_add_str. */
enum qr_err qr_gguf_writer_add(struct qr_gguf_writer *w, const char *key, enum qr_gguf_type type,
                               const void *val);
enum qr_err qr_gguf_writer_add_u32(struct qr_gguf_writer *w, const char *key, uint32_t v);
enum qr_err qr_gguf_writer_add_i32(struct qr_gguf_writer *w, const char *key, int32_t v);
enum qr_err qr_gguf_writer_add_u64(struct qr_gguf_writer *w, const char *key, uint64_t v);
enum qr_err qr_gguf_writer_add_f32(struct qr_gguf_writer *w, const char *key, float v);
enum qr_err qr_gguf_writer_add_bool(struct qr_gguf_writer *w, const char *key, bool v);
enum qr_err qr_gguf_writer_add_str(struct qr_gguf_writer *w, const char *key, struct qr_slice v);

/* Arrays of fixed-size elements: n host values of elem_type, copied. */
enum qr_err qr_gguf_writer_add_arr(struct qr_gguf_writer *w, const char *key,
                                   enum qr_gguf_type elem_type, const void *elems, size_t n);
/* String arrays: n slices, copied. */
enum qr_err qr_gguf_writer_add_arr_str(struct qr_gguf_writer *w, const char *key,
                                       const struct qr_slice *items, size_t n);

/* A tensor of a valid ggml type; len must equal qr_ggml_nbytes() of the shape. data is copied;
 * data NULL (with len 0 or the right len) writes zeros without holding a copy. */
enum qr_err qr_gguf_writer_add_tensor(struct qr_gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *dims, const void *data,
                                      size_t len);

/* Serialize: header, keys, tensor infos, padding, data (each tensor aligned). On QR_OK *out is a
 * malloc'ed buffer owned by the caller (free). */
enum qr_err qr_gguf_writer_finish(struct qr_gguf_writer *w, struct qr_diag *diag, uint8_t **out,
                                  size_t *out_len);
/* Serialize to path (created or truncated). */
enum qr_err qr_gguf_writer_write_file(struct qr_gguf_writer *w, const char *path,
                                      struct qr_diag *diag);

#endif
