/*
 * native_file.c — colibri_model_load: a Colibri-native file (docs/FORMAT.md)
 * mmapped, every field validated with overflow-safe arithmetic before use, and
 * the model built through colibri_model_set_tensor with views into the
 * mapping. Also colibri_model_metadata and the plain-C convenience pair
 * colibri_init / colibri_free.
 *
 * Integers and floats of the header, hparams and directory are assembled from
 * little-endian bytes, so they read the same on any host. On a little-endian
 * host the mapping is read-only and the tensors are used in place (zero-copy).
 * A big-endian host maps the file copy-on-write instead and, once the whole
 * file has validated, byte-swaps every tensor in it (colibri_model_to_host_order):
 * there the weights are a private copy, not zero-copy.
 */
#define _DEFAULT_SOURCE 1   /* mmap, O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "native_file.h"
#include "../kernels/quant.h"

static const unsigned char colibri_file_magic[8] = {'C', 'O', 'L', 'I', 'B', 'R', 'I', 0};

#define COLIBRI_INIT_MAX_BATCH 512   /* colibri_init's n_batch: min(n_ctx, this) */

/* ---- the mapped file a model's weights live in --------------------------------- */
struct colibri_file {
    void *base;                  /* base: [size] the whole file (PROT_READ; copy-on-write,
                                    tensors byte-swapped, on big-endian hosts) */
    size_t size;
    const char *metadata;        /* metadata: [metadata_len] inside base */
    size_t metadata_len;
};

void colibri_file_close(colibri_file *f) {
    if (!f) return;
    munmap(f->base, f->size);
    free(f);
}

/* ---- little-endian reads ------------------------------------------------------ */

static uint32_t colibri_le_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t colibri_le_u64(const unsigned char *p) {
    return (uint64_t)colibri_le_u32(p) | (uint64_t)colibri_le_u32(p + 4) << 32;
}

static int32_t colibri_le_i32(const unsigned char *p) {
    uint32_t u = colibri_le_u32(p);
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static int64_t colibri_le_i64(const unsigned char *p) {
    uint64_t u = colibri_le_u64(p);
    int64_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static float colibri_le_f32(const unsigned char *p) {
    uint32_t u = colibri_le_u32(p);
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static int colibri_host_is_big_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 0;
}

/* x rounded up to a multiple of 64, or UINT64_MAX if that overflows. */
static uint64_t colibri_align64(uint64_t x) {
    if (x > UINT64_MAX - (COLIBRI_FILE_ALIGN - 1)) return UINT64_MAX;
    return (x + (COLIBRI_FILE_ALIGN - 1)) & ~(uint64_t)(COLIBRI_FILE_ALIGN - 1);
}

/* Whether bytes [from, to) of the file are all zero (alignment padding). */
static int colibri_zeros(const unsigned char *base, uint64_t from, uint64_t to) {
    for (uint64_t i = from; i < to; i++) {
        if (base[i]) return 0;
    }
    return 1;
}

/* ---- header and hparams ---------------------------------------------------------- */

typedef struct colibri_file_header {
    uint32_t version, header_size, n_tensors, hparams_size;
    uint64_t directory_offset, metadata_offset, metadata_size, data_offset;
    int32_t n_layer, n_expert;
} colibri_file_header;

#define COLIBRI_FAIL(...) colibri_error_set(COLIBRI_ERR_INVALID, __VA_ARGS__)

/* Reads and checks the 64-byte header and the section layout it describes. */
static int colibri_file_read_header(const char *path, const unsigned char *b, uint64_t size,
                                    colibri_file_header *h) {
    if (size < COLIBRI_FILE_HEADER_BYTES) {
        return COLIBRI_FAIL("%s: file is %llu bytes, smaller than the %d-byte header", path,
                            (unsigned long long)size, COLIBRI_FILE_HEADER_BYTES);
    }
    if (memcmp(b, colibri_file_magic, sizeof colibri_file_magic) != 0) {
        return COLIBRI_FAIL("%s: magic: not a Colibri-native file (expected \"COLIBRI\\0\")", path);
    }
    h->version = colibri_le_u32(b + 8);
    h->header_size = colibri_le_u32(b + 12);
    h->n_tensors = colibri_le_u32(b + 16);
    h->hparams_size = colibri_le_u32(b + 20);
    h->directory_offset = colibri_le_u64(b + 24);
    h->metadata_offset = colibri_le_u64(b + 32);
    h->metadata_size = colibri_le_u64(b + 40);
    h->data_offset = colibri_le_u64(b + 48);
    h->n_layer = colibri_le_i32(b + 56);
    h->n_expert = colibri_le_i32(b + 60);
    if (h->version != COLIBRI_FILE_VERSION) {
        return COLIBRI_FAIL("%s: version: %u is not supported (this library reads version %d)", path,
                            h->version, COLIBRI_FILE_VERSION);
    }
    if (h->header_size != COLIBRI_FILE_HEADER_BYTES) {
        return COLIBRI_FAIL("%s: header_size: expected %d, got %u", path, COLIBRI_FILE_HEADER_BYTES,
                            h->header_size);
    }
    if (h->hparams_size < COLIBRI_FILE_HPARAMS_FIXED_BYTES ||
        h->hparams_size > size - COLIBRI_FILE_HEADER_BYTES) {
        return COLIBRI_FAIL("%s: hparams_size: %u is not in [%d, %llu] (the file's size)", path,
                            h->hparams_size, COLIBRI_FILE_HPARAMS_FIXED_BYTES,
                            (unsigned long long)(size - COLIBRI_FILE_HEADER_BYTES));
    }
    uint64_t directory_at = colibri_align64(COLIBRI_FILE_HEADER_BYTES + (uint64_t)h->hparams_size);
    if (h->directory_offset != directory_at) {
        return COLIBRI_FAIL("%s: directory_offset: expected %llu (after the hparams, 64-aligned), got %llu",
                            path, (unsigned long long)directory_at,
                            (unsigned long long)h->directory_offset);
    }
    if (h->n_tensors == 0 || directory_at > size ||
        h->n_tensors > (size - directory_at) / COLIBRI_FILE_ENTRY_BYTES) {
        return COLIBRI_FAIL("%s: n_tensors: %u entries of %d bytes do not fit in the file (%llu bytes)",
                            path, h->n_tensors, COLIBRI_FILE_ENTRY_BYTES, (unsigned long long)size);
    }
    uint64_t metadata_at = directory_at + (uint64_t)h->n_tensors * COLIBRI_FILE_ENTRY_BYTES;
    if (h->metadata_offset != metadata_at) {
        return COLIBRI_FAIL("%s: metadata_offset: expected %llu (right after the directory), got %llu",
                            path, (unsigned long long)metadata_at, (unsigned long long)h->metadata_offset);
    }
    if (h->metadata_size > size - metadata_at) {
        return COLIBRI_FAIL("%s: metadata_size: %llu bytes at offset %llu run past the end of the file "
                            "(%llu bytes)", path, (unsigned long long)h->metadata_size,
                            (unsigned long long)metadata_at, (unsigned long long)size);
    }
    uint64_t data_at = colibri_align64(metadata_at + h->metadata_size);
    if (h->data_offset != data_at || data_at > size) {
        return COLIBRI_FAIL("%s: data_offset: expected %llu (after the metadata, 64-aligned, inside the "
                            "file), got %llu", path, (unsigned long long)data_at,
                            (unsigned long long)h->data_offset);
    }
    uint64_t hparams_end = COLIBRI_FILE_HEADER_BYTES + (uint64_t)h->hparams_size;
    if (!colibri_zeros(b, hparams_end, directory_at) || !colibri_zeros(b, metadata_at + h->metadata_size, data_at)) {
        return COLIBRI_FAIL("%s: alignment padding between sections must be zero bytes", path);
    }
    return COLIBRI_OK;
}

/* The hparams fields after version 1's 88 bytes, in file order (FORMAT.md
 * "Extension fields"): each 4 bytes, an i32 or an f32. Appended to, never
 * reordered; a file with fewer leaves the rest 0 (their defaults).
 * COLIBRI_FILE_HP_EXT_WINDOWS marks the one that is not a colibri_hparams
 * field: layer_windows, 1 when an i32[n_layer] of per-layer sliding windows
 * follows layer_is_moe (hp->layer_window), 0 when every layer uses sliding_window. */
#define COLIBRI_FILE_HP_EXT_WINDOWS SIZE_MAX
static const size_t colibri_file_hp_ext[] = {
    offsetof(colibri_hparams, router_score),     offsetof(colibri_hparams, router_bias),
    offsetof(colibri_hparams, router_sel_bias),  offsetof(colibri_hparams, router_n_group),
    offsetof(colibri_hparams, router_group_used), offsetof(colibri_hparams, router_group_top),
    offsetof(colibri_hparams, router_norm_min),  offsetof(colibri_hparams, router_norm_eps),
    offsetof(colibri_hparams, router_scale),
    offsetof(colibri_hparams, kv_lora_rank),     offsetof(colibri_hparams, q_lora_rank),
    offsetof(colibri_hparams, head_dim_nope),    offsetof(colibri_hparams, head_dim_v),
    offsetof(colibri_hparams, latent_norm_eps),
    offsetof(colibri_hparams, rope_dim),
    offsetof(colibri_hparams, embd_scale),       offsetof(colibri_hparams, residual_scale),
    offsetof(colibri_hparams, logit_scale),
    offsetof(colibri_hparams, attn_out_bias),    offsetof(colibri_hparams, attn_sinks),
    offsetof(colibri_hparams, expert_bias),      offsetof(colibri_hparams, ffn_act),
    offsetof(colibri_hparams, ffn_alpha),        offsetof(colibri_hparams, ffn_limit),
    COLIBRI_FILE_HP_EXT_WINDOWS,
};
#define COLIBRI_FILE_HP_EXT_KNOWN (sizeof colibri_file_hp_ext / sizeof colibri_file_hp_ext[0])

/* Reads the extension fields at p (n_ext of them, inside the block) into hp,
 * and the layer_windows flag into *windows; a field this reader does not know
 * must be 0. */
static int colibri_file_read_hp_ext(const char *path, const unsigned char *p, uint32_t n_ext, colibri_hparams *hp,
                                    int32_t *windows) {
    *windows = 0;
    for (uint32_t i = 0; i < n_ext; i++) {
        uint32_t bits = colibri_le_u32(p + 4 * (size_t)i);
        if (i < COLIBRI_FILE_HP_EXT_KNOWN && colibri_file_hp_ext[i] == COLIBRI_FILE_HP_EXT_WINDOWS) {
            *windows = (int32_t)bits;
            if (*windows != 0 && *windows != 1) {
                return COLIBRI_FAIL("%s: hparams: layer_windows must be 0 or 1, got %d", path, *windows);
            }
        } else if (i < COLIBRI_FILE_HP_EXT_KNOWN) {
            memcpy((char *)hp + colibri_file_hp_ext[i], &bits, sizeof bits);   /* i32 or f32, 4 bytes */
        } else if (bits != 0) {
            return COLIBRI_FAIL("%s: hparams: extension field %u is unknown to this reader (it knows %u; "
                                "a newer Colibri wrote the file) and not 0", path, i,
                                (unsigned)COLIBRI_FILE_HP_EXT_KNOWN);
        }
    }
    return COLIBRI_OK;
}

/* Reads the hparams block into hp; its arrays point into the mapping or into
 * *arrays (one allocation for the copied rope_inv_freq and layer windows, which
 * the caller frees once the model has copied them). Checks the block's size
 * against n_ext, head_dim, n_layer and the layer_windows flag;
 * colibri_model_create checks the values. */
static int colibri_file_read_hparams(const char *path, const unsigned char *b, const colibri_file_header *h,
                                     colibri_hparams *hp, void **arrays) {
    const unsigned char *p = b + COLIBRI_FILE_HEADER_BYTES;
    int32_t *ints[17] = {&hp->n_vocab, &hp->n_embd, &hp->n_layer, &hp->n_head, &hp->n_head_kv,
                         &hp->head_dim, &hp->n_ff, &hp->n_expert, &hp->n_expert_used, &hp->n_ff_expert,
                         &hp->n_ff_shared, &hp->shared_gated, &hp->router_renorm, &hp->qk_norm,
                         &hp->attn_bias, &hp->tied_embeddings, &hp->sliding_window};
    for (int i = 0; i < 17; i++) *ints[i] = colibri_le_i32(p + 4 * i);
    hp->norm_eps = colibri_le_f32(p + 68);
    hp->attn_scale = colibri_le_f32(p + 72);
    hp->rope_attn_factor = colibri_le_f32(p + 76);
    hp->qkv_clip = colibri_le_f32(p + 80);
    hp->rope_interleaved = colibri_le_i32(p + 84);
    if (hp->head_dim <= 0 || hp->head_dim % 2 || hp->n_layer <= 0) {
        return COLIBRI_FAIL("%s: hparams: head_dim must be even and > 0 and n_layer > 0, got %d and %d",
                            path, hp->head_dim, hp->n_layer);
    }
    uint32_t n_ext = colibri_le_u32(p + COLIBRI_FILE_HPARAMS_V1_BYTES);
    uint64_t ext_end = COLIBRI_FILE_HPARAMS_FIXED_BYTES + 4 * (uint64_t)n_ext;
    uint64_t want = ext_end + 2 * (uint64_t)hp->head_dim + (uint64_t)hp->n_layer;
    int32_t windows = 0;
    if (h->hparams_size >= ext_end) {   /* the extension fields lie inside the block */
        int rc = colibri_file_read_hp_ext(path, p + COLIBRI_FILE_HPARAMS_FIXED_BYTES, n_ext, hp, &windows);
        if (rc != COLIBRI_OK) return rc;
        want += windows ? 4 * (uint64_t)hp->n_layer : 0;
    }
    if (h->hparams_size != want) {
        return COLIBRI_FAIL("%s: hparams_size: expected %llu (92 + 4*n_ext + 4*head_dim/2 + n_layer, "
                            "+ 4*n_layer with layer_windows), got %u", path, (unsigned long long)want,
                            h->hparams_size);
    }
    p += 4 * (size_t)n_ext;   /* the arrays follow the extension fields */
    if (h->n_layer != hp->n_layer || h->n_expert != hp->n_expert) {
        return COLIBRI_FAIL("%s: header n_layer/n_expert (%d, %d) differ from the hparams block's (%d, %d)",
                            path, h->n_layer, h->n_expert, hp->n_layer, hp->n_expert);
    }
    int32_t half = hp->head_dim / 2;
    /* one allocation: inv_freq [half] f32, then the windows [n_layer] i32 if any */
    *arrays = malloc((size_t)half * sizeof(float) + (windows ? (size_t)hp->n_layer * sizeof(int32_t) : 0));
    if (!*arrays) return colibri_error_set(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    float *inv_freq = (float *)*arrays;
    const unsigned char *at = p + COLIBRI_FILE_HPARAMS_FIXED_BYTES;
    for (int32_t i = 0; i < half; i++) inv_freq[i] = colibri_le_f32(at + 4 * (size_t)i);
    hp->rope_inv_freq = inv_freq;
    hp->layer_is_moe = at + 4 * (size_t)half;
    if (windows) {
        int32_t *window = (int32_t *)(inv_freq + half);   /* window: [n_layer] */
        const unsigned char *src = hp->layer_is_moe + hp->n_layer;
        for (int32_t l = 0; l < hp->n_layer; l++) window[l] = colibri_le_i32(src + 4 * (size_t)l);
        hp->layer_window = window;
    }
    return COLIBRI_OK;
}

/* Prefixes the last error (from the model API) with the path and, when
 * tensor >= 0, the directory entry index. */
static int colibri_file_prefix_error(const char *path, int64_t tensor) {
    char why[256];
    strncpy(why, colibri_last_error(), sizeof why - 1);
    why[sizeof why - 1] = 0;
    if (tensor >= 0) return COLIBRI_FAIL("%s: tensor %lld: %s", path, (long long)tensor, why);
    return COLIBRI_FAIL("%s: %s", path, why);
}

/* ---- tensor directory ----------------------------------------------------------- */

typedef struct colibri_file_entry {
    int32_t kind, layer, expert, dtype;
    int64_t rows, cols;
    uint64_t offset, nbytes;
} colibri_file_entry;

/* Directory order (FORMAT.md): globals by kind; then per layer the kinds in
 * enum order, the expert kinds grouped by expert (gate, up, down adjacent).
 * Returns <0, 0, >0 as a sorts before, equal to, after b. */
static int colibri_entry_order(const colibri_file_entry *a, const colibri_file_entry *b) {
    int64_t ka[5], kb[5];
    const colibri_file_entry *e[2] = {a, b};
    int64_t *k[2] = {ka, kb};
    for (int i = 0; i < 2; i++) {
        int global = e[i]->kind <= COLIBRI_T_OUTPUT;
        int section = e[i]->kind < COLIBRI_T_EXPERT_GATE ? 0 : e[i]->kind <= COLIBRI_T_EXPERT_DOWN ? 1 : 2;
        k[i][0] = !global;
        k[i][1] = global ? 0 : e[i]->layer;
        k[i][2] = section;
        k[i][3] = section == 1 ? e[i]->expert : 0;
        k[i][4] = e[i]->kind;
    }
    for (int j = 0; j < 5; j++) {
        if (ka[j] != kb[j]) return ka[j] < kb[j] ? -1 : 1;
    }
    return 0;
}

static void colibri_file_read_entry(const unsigned char *p, colibri_file_entry *e) {
    e->kind = colibri_le_i32(p);
    e->layer = colibri_le_i32(p + 4);
    e->expert = colibri_le_i32(p + 8);
    e->dtype = colibri_le_i32(p + 12);
    e->rows = colibri_le_i64(p + 16);
    e->cols = colibri_le_i64(p + 24);
    e->offset = colibri_le_u64(p + 32);
    e->nbytes = colibri_le_u64(p + 40);
}

/* Checks entry i (prev: entry i-1 or NULL; *end: where the previous tensor's
 * bytes end) and registers its view with the model. */
static int colibri_file_add_tensor(const char *path, const unsigned char *b, uint64_t size,
                                   colibri_model *m, uint32_t i, const colibri_file_entry *e,
                                   const colibri_file_entry *prev, uint64_t *end) {
    if (e->kind < 0 || e->kind >= COLIBRI_T_COUNT) {
        return COLIBRI_FAIL("%s: tensor %u: kind %d out of range [0, %d)", path, i, e->kind, COLIBRI_T_COUNT);
    }
    if (prev && colibri_entry_order(prev, e) >= 0) {
        return COLIBRI_FAIL("%s: tensor %u (kind %d, layer %d, expert %d): out of directory order or repeated "
                            "(after kind %d, layer %d, expert %d)", path, i, e->kind, e->layer, e->expert,
                            prev->kind, prev->layer, prev->expert);
    }
    const colibri_type_traits *type = colibri_type_traits_of(e->dtype);
    if (!colibri_type_is_weight(e->dtype)) {
        return COLIBRI_FAIL("%s: tensor %u: unknown dtype %d", path, i, e->dtype);
    }
    if (e->rows < 1 || e->cols < 1 || e->cols % type->block_elems != 0 ||
        e->cols / type->block_elems > INT64_MAX / type->block_bytes) {
        return COLIBRI_FAIL("%s: tensor %u: shape [%lld, %lld] is not valid for dtype %s", path, i,
                            (long long)e->rows, (long long)e->cols, type->name);
    }
    uint64_t row_bytes = (uint64_t)(e->cols / type->block_elems * type->block_bytes);
    if ((uint64_t)e->rows > UINT64_MAX / row_bytes || e->nbytes != (uint64_t)e->rows * row_bytes) {
        return COLIBRI_FAIL("%s: tensor %u: nbytes %llu does not match shape [%lld, %lld] of %s", path, i,
                            (unsigned long long)e->nbytes, (long long)e->rows, (long long)e->cols, type->name);
    }
    if (e->offset % COLIBRI_FILE_ALIGN != 0) {
        return COLIBRI_FAIL("%s: tensor %u: offset %llu is not a multiple of %d", path, i,
                            (unsigned long long)e->offset, COLIBRI_FILE_ALIGN);
    }
    if (e->offset < *end) {
        return COLIBRI_FAIL("%s: tensor %u: offset %llu overlaps the %s (which ends at %llu)", path, i,
                            (unsigned long long)e->offset, prev ? "previous tensor" : "metadata",
                            (unsigned long long)*end);
    }
    if (e->offset > size || e->nbytes > size - e->offset) {
        return COLIBRI_FAIL("%s: tensor %u: bytes [%llu, %llu + %llu) run past the end of the file "
                            "(%llu bytes)", path, i, (unsigned long long)e->offset,
                            (unsigned long long)e->offset, (unsigned long long)e->nbytes,
                            (unsigned long long)size);
    }
    if (e->offset != colibri_align64(*end)) {
        return COLIBRI_FAIL("%s: tensor %u: offset %llu leaves a gap (tensors are packed in directory "
                            "order at 64-byte boundaries: expected %llu)", path, i,
                            (unsigned long long)e->offset, (unsigned long long)colibri_align64(*end));
    }
    if (!colibri_zeros(b, *end, e->offset)) {
        return COLIBRI_FAIL("%s: tensor %u: the alignment padding before it must be zero bytes", path, i);
    }
    if (colibri_model_set_tensor(m, e->kind, e->layer, e->expert, b + e->offset, e->dtype, e->rows, e->cols)) {
        return colibri_file_prefix_error(path, i);
    }
    *end = e->offset + e->nbytes;
    return COLIBRI_OK;
}

/* ---- big-endian hosts ------------------------------------------------------------ */

/* Reverses the n bytes at p. */
static void colibri_reverse(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n / 2; i++) {
        unsigned char t = p[i];
        p[i] = p[n - 1 - i];
        p[n - 1 - i] = t;
    }
}

/* Converts one weight of the model (NULL data: not set, nothing to do) from
 * the file's little-endian order to a big-endian host's, in place: each F32
 * word, and each f16 field the type table lists (F16 / BF16 values; d, and m
 * or dmin, of the block types; quant bytes, and the block fields the kernels
 * read byte by byte, have no byte order). */
static void colibri_tensor_to_host_order(const colibri_tensor *t) {
    if (!t->data) return;
    const colibri_type_traits *type = colibri_type_traits_of(t->dtype);
    const size_t step = (size_t)type->block_bytes;
    unsigned char *p = (unsigned char *)t->data;   /* inside the writable copy-on-write mapping */
    unsigned char *end = p + (size_t)(t->rows * (t->cols / type->block_elems)) * step;
    for (; p < end; p += step) {
        if (t->dtype == COLIBRI_DTYPE_F32) colibri_reverse(p, 4);
        for (int k = 0; k < 2; k++) {
            if (type->f16_at[k] >= 0) colibri_reverse(p + type->f16_at[k], 2);
        }
    }
}

/* Byte-swaps every weight of m, a model colibri_file_build built from a
 * copy-on-write mapping that passed every check, for a big-endian host. It
 * walks the model's validated tensor records, not the file's directory again;
 * each weight is its own range of the file, so each is swapped exactly once. */
static void colibri_model_to_host_order(colibri_model *m) {
    const size_t n_global = sizeof m->global / sizeof m->global[0];
    for (size_t k = 0; k < n_global; k++) colibri_tensor_to_host_order(&m->global[k]);
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const colibri_layer *layer = &m->layers[l];
        for (int k = 0; k < COLIBRI_T_COUNT; k++) colibri_tensor_to_host_order(&layer->t[k]);
        int64_t n_experts = layer->experts ? (int64_t)m->hp.n_expert * COLIBRI_EXPERT_KINDS : 0;
        for (int64_t j = 0; j < n_experts; j++) colibri_tensor_to_host_order(&layer->experts[j]);
    }
}

/* ---- load ------------------------------------------------------------------- */

/* Maps path: *base, *size; 0 or an error status. Read-only and shared with the
 * page cache on little-endian hosts; copy-on-write (MAP_PRIVATE, writable) on
 * big-endian ones, for colibri_model_to_host_order. MADV_HUGEPAGE (best
 * effort): pages the kernel reads in for the mapping come as large folios
 * mapped 2 MiB at a time, fewer TLB misses for a decode step streaming the
 * weights (BENCHMARKS.md). When the experts will be paged (COLIBRI_LOAD_PAGED):
 * MADV_RANDOM instead, so the checks touch single pages, not the expert bytes
 * around them. */
static int colibri_file_map(const char *path, int paged, void **base, uint64_t *size) {
    /* A FIFO, device or socket is refused before any open (opening a FIFO for reading waits
     * for a writer); O_NONBLOCK and the fstat below cover a file swapped in between. */
    struct stat st;
    if (stat(path, &st) != 0) return COLIBRI_FAIL("%s: cannot open (%s)", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return COLIBRI_FAIL("%s: not a regular file", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return COLIBRI_FAIL("%s: cannot open (%s)", path, strerror(errno));
    int rc = COLIBRI_OK;
    if (fstat(fd, &st) != 0) {
        rc = COLIBRI_FAIL("%s: cannot stat (%s)", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = COLIBRI_FAIL("%s: not a regular file", path);
    } else if ((uint64_t)st.st_size < COLIBRI_FILE_HEADER_BYTES) {
        rc = COLIBRI_FAIL("%s: file is %llu bytes, smaller than the %d-byte header", path,
                          (unsigned long long)st.st_size, COLIBRI_FILE_HEADER_BYTES);
    } else if ((uint64_t)st.st_size > SIZE_MAX) {
        rc = COLIBRI_FAIL("%s: file is too large to map on this host", path);
    } else {
        *size = (uint64_t)st.st_size;
        int prot = colibri_host_is_big_endian() ? PROT_READ | PROT_WRITE : PROT_READ;
        *base = mmap(NULL, (size_t)*size, prot, MAP_PRIVATE, fd, 0);
        if (*base == MAP_FAILED) rc = COLIBRI_FAIL("%s: cannot mmap (%s)", path, strerror(errno));
        else madvise(*base, (size_t)*size, paged ? MADV_RANDOM : MADV_HUGEPAGE);
    }
    close(fd);
    return rc;
}

/* Validates the mapped file and builds its model (NULL on failure). */
static colibri_model *colibri_file_build(const char *path, const unsigned char *b, uint64_t size,
                                         const colibri_file_header *h) {
    colibri_hparams hp;
    void *inv_freq = NULL;   /* the hparams' copied arrays */
    memset(&hp, 0, sizeof hp);
    if (colibri_file_read_hparams(path, b, h, &hp, &inv_freq)) {
        free(inv_freq);
        return NULL;
    }
    /* Before colibri_model_create allocates a table of n_expert entries per MoE layer: the
     * routed experts' matrices alone must fit in the directory. */
    int64_t moe_layers = 0;
    for (int32_t l = 0; l < hp.n_layer; l++) moe_layers += hp.layer_is_moe[l] != 0;
    if (hp.n_expert > 0 && moe_layers > 0 &&
        hp.n_expert > (int64_t)h->n_tensors / COLIBRI_EXPERT_KINDS / moe_layers) {
        COLIBRI_FAIL("%s: hparams: n_expert=%d: %lld MoE layers x %d experts x %d matrices need more "
                     "tensors than the directory's n_tensors=%u", path, hp.n_expert, (long long)moe_layers,
                     hp.n_expert, COLIBRI_EXPERT_KINDS, h->n_tensors);
        free(inv_freq);
        return NULL;
    }
    colibri_model *m = colibri_model_create(&hp);
    free(inv_freq);
    if (!m) {
        colibri_file_prefix_error(path, -1);
        return NULL;
    }
    size_t bad_at;
    const char *what;
    if (!colibri_json_check_object((const char *)b + h->metadata_offset, (size_t)h->metadata_size, &bad_at,
                                   &what)) {
        COLIBRI_FAIL("%s: metadata: not a UTF-8 JSON object (%s at byte %llu)", path, what,
                     (unsigned long long)bad_at);
        colibri_model_free(m);
        return NULL;
    }
    colibri_file_entry prev, e;
    uint64_t end = h->metadata_offset + h->metadata_size;
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        colibri_file_read_entry(b + h->directory_offset + (uint64_t)i * COLIBRI_FILE_ENTRY_BYTES, &e);
        if (colibri_file_add_tensor(path, b, size, m, i, &e, i ? &prev : NULL, &end)) {
            colibri_model_free(m);
            return NULL;
        }
        prev = e;
    }
    if (end != size) {
        COLIBRI_FAIL("%s: %llu bytes after the last tensor (the file must end where it ends, at %llu)", path,
                     (unsigned long long)(size - end), (unsigned long long)end);
    } else if (colibri_model_finalize(m)) {
        colibri_file_prefix_error(path, -1);
    } else {
        return m;
    }
    colibri_model_free(m);
    return NULL;
}

COLIBRI_API colibri_model *colibri_model_load(const char *path) {
    return colibri_model_load_flags(path, 0);
}

COLIBRI_API colibri_model *colibri_model_load_flags(const char *path, uint32_t flags) {
    if (!path) {
        COLIBRI_FAIL("colibri_model_load: path is NULL");
        return NULL;
    }
    if (flags & ~COLIBRI_LOAD_PAGED) {
        COLIBRI_FAIL("colibri_model_load: unknown flags 0x%x", flags & ~COLIBRI_LOAD_PAGED);
        return NULL;
    }
    void *base = NULL;
    uint64_t size = 0;
    if (colibri_file_map(path, (flags & COLIBRI_LOAD_PAGED) != 0, &base, &size)) return NULL;
    colibri_file_header h = {0};
    colibri_model *m = NULL;
    colibri_file *f = NULL;
    if (colibri_file_read_header(path, (const unsigned char *)base, size, &h) == COLIBRI_OK) {
        m = colibri_file_build(path, (const unsigned char *)base, size, &h);
    }
    if (m) {
        if (colibri_host_is_big_endian()) colibri_model_to_host_order(m);
        f = (colibri_file *)calloc(1, sizeof *f);
        if (!f) colibri_error_set(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
        else if (colibri_model_add_file(m, path, base, size)) f = (free(f), NULL);   /* where paging reads */
    }
    if (!f) {
        colibri_model_free(m);
        munmap(base, (size_t)size);
        return NULL;
    }
    f->base = base;
    f->size = (size_t)size;
    f->metadata = (const char *)base + h.metadata_offset;
    f->metadata_len = (size_t)h.metadata_size;
    m->file = f;   /* the model owns the mapping from here on */
    return m;
}

COLIBRI_API int colibri_model_metadata(const colibri_model *m, const char **json, size_t *len) {
    if (!m || !json || !len) return COLIBRI_FAIL("colibri_model_metadata: NULL argument");
    const colibri_file *f = m->file;
    if (!f) return COLIBRI_FAIL("colibri_model_metadata: the model was not loaded from a file");
    *json = f->metadata;
    *len = f->metadata_len;
    return COLIBRI_OK;
}

/* ---- plain-C convenience ----------------------------------------------------------- */

COLIBRI_API colibri_context *colibri_init(const char *path, int32_t n_ctx, int32_t n_threads) {
    colibri_model *m = colibri_model_load(path);
    if (!m) return NULL;
    int32_t n_batch = n_ctx < COLIBRI_INIT_MAX_BATCH ? n_ctx : COLIBRI_INIT_MAX_BATCH;
    colibri_context *ctx = colibri_context_create(m, n_ctx, 1, n_batch, n_threads);
    if (!ctx) colibri_model_free(m);
    return ctx;
}

COLIBRI_API void colibri_free(colibri_context *ctx) {
    if (!ctx) return;
    colibri_model *m = (colibri_model *)ctx->model;
    colibri_context_free(ctx);
    colibri_model_free(m);
}

COLIBRI_API const colibri_hparams *colibri_context_hparams(const colibri_context *ctx) {
    return ctx ? &ctx->model->hp : NULL;
}
