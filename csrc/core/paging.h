/*
 * paging.h — the expert cache of a paging context (internal; the public side
 * is the paging section of colibri.h, the design is docs/PAGING.md).
 *
 *   expert_layout.c  where each expert's bytes lie in its files, the slot layout
 *   expert_io.c      positioned reads of an expert into a slot, page-cache advice
 *   expert_cache.c   slots, eviction, readers, waves, read-ahead, counters
 *
 * The forward pass sees only the three hooks below: a MoE layer announces the
 * experts it needs, asks for each expert's weights (in a slot, or the model's
 * own when the context does not page) and runs its experts in waves until
 * colibri_paging_next_wave says they are all done.
 */
#ifndef COLIBRI_PAGING_H
#define COLIBRI_PAGING_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define COLIBRI_PAGE_ALIGN 4096   /* the unit of direct reads: file offsets, lengths and buffers */

typedef struct colibri_paging colibri_paging;   /* a context's expert cache (expert_cache.c) */

/* ---- forward-pass hooks (moe.c, forward.c, context.c) ---------------------------- */

/* Fills jobs[0..n) with the next n MoE layers' routers on layer `layer`'s
 * input (for the read-ahead's predictions; run with the layer's own router)
 * and returns n: up to the read-ahead depth (2), fewer near the last MoE
 * layer, 0 without paging or read-ahead. */
#define COLIBRI_PREFETCH_MAX 2
int colibri_paging_predict_jobs(colibri_context *ctx, int32_t layer, int32_t n_tokens, colibri_matmul_job *jobs);
/* Layer `layer` is about to run the experts its dispatcher counted
 * (ctx->s.expert_count): asks for them, reads ahead for the next MoE layers,
 * and returns once the first wave's experts are in their slots. No-op when
 * ctx does not page. */
void colibri_paging_layer_begin(colibri_context *ctx, int32_t layer, int32_t n_tokens);
/* The weights ([COLIBRI_EXPERT_KINDS] gate, up, down) of expert e of layer
 * `layer` for the current wave; NULL when e is not part of it. Without
 * paging: the model's own tensors, every expert in one wave. */
const colibri_tensor *colibri_expert_weights(const colibri_context *ctx, int32_t layer, int32_t e);
/* After a wave has run: 1 when another wave is ready (its experts' weights
 * now come from colibri_expert_weights), 0 when the layer is done. */
int colibri_paging_next_wave(colibri_context *ctx, int32_t layer);
/* COLIBRI_OK, or COLIBRI_ERR_IO (with the error line) when a read failed
 * during the step that just ran; clears the failure. */
int colibri_paging_step_status(colibri_context *ctx);
/* Stops the readers and frees everything (NULL: nothing). */
void colibri_paging_free(colibri_paging *p);
/* COLIBRI_OK, or an error when p's readers live in another process: this one is a fork()
 * child of the one that made it (colibri_forward refuses such a step; free is safe). */
int colibri_paging_check_process(const colibri_paging *p);

/* ---- layout (expert_layout.c) ------------------------------------------------------- */

/* One positioned read: [offset, offset + len) of a source file into the slot
 * at buf; offset, len and buf are multiples of COLIBRI_PAGE_ALIGN. The bytes
 * past `need` are padding up to the page (a read may end at the file's end
 * after them). */
typedef struct colibri_expert_window {
    int32_t source;      /* index into model->sources */
    uint64_t buf;        /* where the window starts inside the slot */
    uint64_t offset;     /* file offset */
    uint64_t len;
    uint64_t need;
} colibri_expert_window;

/* Where one expert's tensors lie: one window per run of tensors that are
 * adjacent in a file (the native format: one; GGUF's [E, ...] stacks and
 * safetensors: up to one per tensor). */
typedef struct colibri_expert_layout {
    colibri_expert_window win[COLIBRI_EXPERT_KINDS];
    uint64_t at[COLIBRI_EXPERT_KINDS];   /* each tensor's first byte inside the slot */
    int32_t n_win;
} colibri_expert_layout;

/* Fills layout[l * n_expert + e] for every expert of every MoE layer and
 * *slot_bytes (the largest expert's windows, together). Fails, naming the
 * tensor, when one lies in no declared file. */
int colibri_expert_layouts(const colibri_model *m, colibri_expert_layout *layout, uint64_t *slot_bytes);
/* Calls fn(arg, start, end) for each run of pages [start, end) (addresses,
 * page-aligned, merged) holding the model's resident weights. Returns the
 * total bytes, or -1 when out of memory. */
int64_t colibri_resident_pages(const colibri_model *m, void (*fn)(void *arg, uintptr_t start, uintptr_t end),
                               void *arg);

/* ---- reads (expert_io.c) --------------------------------------------------------------- */

typedef struct colibri_expert_files {
    int32_t n;
    int *fd;             /* fd: [n] buffered descriptors */
    int *fd_direct;      /* fd_direct: [n] O_DIRECT descriptors, -1 where not used */
    int *direct_ok;      /* direct_ok: [n] 1 while O_DIRECT reads succeed (atomic) */
} colibri_expert_files;

/* Opens every source of m (O_DIRECT too when direct). 0, or -1 with err set. */
int colibri_expert_files_open(colibri_expert_files *f, const colibri_model *m, int direct, char *err,
                              size_t err_len);
void colibri_expert_files_close(colibri_expert_files *f);
/* 1 when every file is read with O_DIRECT. */
int colibri_expert_files_direct(const colibri_expert_files *f);
/* An expert is read in pieces, so that several readers share one expert's
 * read: each window cut into equal runs of whole pages of at most
 * COLIBRI_READ_PIECE bytes. colibri_expert_pieces: how many;
 * colibri_expert_piece: piece i as a window of its own (0, or -1 when there
 * is no piece i); colibri_expert_read_piece: reads piece i into the slot at
 * buf (*bytes: bytes read; 0, or -1 with err naming the file). Safe from
 * several threads at once. */
#define COLIBRI_READ_PIECE ((uint64_t)1 << 20)
int32_t colibri_expert_pieces(const colibri_expert_layout *lay);
int colibri_expert_piece(const colibri_expert_layout *lay, int32_t piece, colibri_expert_window *out);
int colibri_expert_read_piece(colibri_expert_files *f, const colibri_model *m, const colibri_expert_layout *lay,
                              int32_t piece, char *buf, uint64_t *bytes, char *err, size_t err_len);
/* Advises the model's mappings for paging: random access without huge pages,
 * the experts' pages dropped from this process and the page cache, the
 * resident weights' pages read ahead. Best effort. */
void colibri_expert_files_advise(const colibri_expert_files *f, const colibri_model *m,
                                 const colibri_expert_layout *layout);

#endif /* COLIBRI_PAGING_H */
