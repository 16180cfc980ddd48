/*
 * expert_layout.c — where paging finds the bytes: the files a model's weights
 * were mapped from (colibri_model_add_file), each routed expert's byte ranges
 * in them widened to whole pages and packed into one slot layout, the pages of
 * the resident weights, and what paging a model costs (colibri_model_paging_sizes).
 * Ranges come from each tensor's dtype row size, so every block type is handled
 * the same way.
 */
#define _DEFAULT_SOURCE 1
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "paging.h"
#include "../kernels/quant.h"

static uint64_t colibri_page_down(uint64_t x) {
    return x & ~(uint64_t)(COLIBRI_PAGE_ALIGN - 1);
}

static uint64_t colibri_page_up(uint64_t x) {
    return (x + COLIBRI_PAGE_ALIGN - 1) & ~(uint64_t)(COLIBRI_PAGE_ALIGN - 1);
}

/* Bytes of a set tensor (rows of its dtype's row size). */
static uint64_t colibri_tensor_bytes(const colibri_tensor *t) {
    return (uint64_t)t->rows * (uint64_t)colibri_row_bytes(t->dtype, t->cols);
}

/* ---- sources ------------------------------------------------------------------- */

COLIBRI_API int colibri_model_add_file(colibri_model *m, const char *path, const void *base, uint64_t size) {
    if (!m || !path || !base || size == 0) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "add_file: model, path and base must be set and size > 0");
    }
    if ((uintptr_t)base % COLIBRI_PAGE_ALIGN != 0 || (uintptr_t)base > UINTPTR_MAX - size) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "add_file: %s: base %p is not a page-aligned mapping of "
                                 "%llu bytes", path, base, (unsigned long long)size);
    }
    colibri_source *grown = realloc(m->sources, (size_t)(m->n_sources + 1) * sizeof *grown);
    char *copy = malloc(strlen(path) + 1);
    if (grown) m->sources = grown;
    if (!grown || !copy) {
        free(copy);
        return colibri_error_set(COLIBRI_ERR_NOMEM, "add_file: out of memory");
    }
    strcpy(copy, path);
    m->sources[m->n_sources++] = (colibri_source){copy, (const char *)base, size};
    return COLIBRI_OK;
}

/* The source whose mapping holds [p, p + n), or -1. */
static int32_t colibri_source_of(const colibri_model *m, const char *p, uint64_t n) {
    for (int32_t i = 0; i < m->n_sources; i++) {
        const colibri_source *s = &m->sources[i];
        if (p >= s->base && (uint64_t)(p - s->base) <= s->size && n <= s->size - (uint64_t)(p - s->base)) return i;
    }
    return -1;
}

/* ---- one expert ------------------------------------------------------------------ */

/* Lays out expert e of layer l: tensors sorted by (file, offset); a tensor
 * whose page range meets the previous window's joins it, else it opens a new
 * window; windows are packed in order. *bytes: the slot bytes it needs. */
static int colibri_expert_layout_one(const colibri_model *m, int32_t l, int32_t e, colibri_expert_layout *lay,
                                     uint64_t *bytes) {
    const colibri_tensor *w = &m->layers[l].experts[(int64_t)e * COLIBRI_EXPERT_KINDS];
    int32_t order[COLIBRI_EXPERT_KINDS], src[COLIBRI_EXPERT_KINDS], n = 0;
    uint64_t off[COLIBRI_EXPERT_KINDS];
    memset(lay, 0, sizeof *lay);
    for (int32_t k = 0; k < COLIBRI_EXPERT_KINDS; k++) {
        if (!w[k].data) continue;
        src[k] = colibri_source_of(m, (const char *)w[k].data, colibri_tensor_bytes(&w[k]));
        if (src[k] < 0) {
            return colibri_error_set(COLIBRI_ERR_INVALID, "paging: expert %d of layer %d (tensor %d of 3) is "
                                     "not inside a file declared with colibri_model_add_file", e, l, k);
        }
        off[k] = (uint64_t)((const char *)w[k].data - m->sources[src[k]].base);
        int32_t at = n++;   /* insertion sort by (source, offset) */
        while (at > 0 && (src[order[at - 1]] > src[k] || (src[order[at - 1]] == src[k] && off[order[at - 1]] > off[k]))) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = k;
    }
    uint64_t buf = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t k = order[i];
        uint64_t start = colibri_page_down(off[k]), end = off[k] + colibri_tensor_bytes(&w[k]);
        colibri_expert_window *win = lay->n_win ? &lay->win[lay->n_win - 1] : NULL;
        if (!win || win->source != src[k] || start > win->offset + win->len) {
            if (win) buf += win->len;
            win = &lay->win[lay->n_win++];
            *win = (colibri_expert_window){src[k], buf, start, 0, 0};
        }
        if (colibri_page_up(end) - win->offset > win->len) win->len = colibri_page_up(end) - win->offset;
        if (end - win->offset > win->need) win->need = end - win->offset;
        lay->at[k] = win->buf + (off[k] - win->offset);
    }
    *bytes = lay->n_win ? lay->win[lay->n_win - 1].buf + lay->win[lay->n_win - 1].len : 0;
    return COLIBRI_OK;
}

int colibri_expert_layouts(const colibri_model *m, colibri_expert_layout *layout, uint64_t *slot_bytes) {
    int32_t E = m->hp.n_expert;
    *slot_bytes = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        if (!m->layer_is_moe[l]) continue;
        for (int32_t e = 0; e < E; e++) {
            uint64_t bytes = 0;
            int rc = colibri_expert_layout_one(m, l, e, &layout[(int64_t)l * E + e], &bytes);
            if (rc) return rc;
            if (bytes > *slot_bytes) *slot_bytes = bytes;
        }
    }
    return COLIBRI_OK;
}

/* ---- resident pages ------------------------------------------------------------------- */

typedef struct colibri_page_run {
    uintptr_t start, end;
} colibri_page_run;

static int colibri_page_run_cmp(const void *a, const void *b) {
    uintptr_t x = ((const colibri_page_run *)a)->start, y = ((const colibri_page_run *)b)->start;
    return x < y ? -1 : x > y;
}

int64_t colibri_resident_pages(const colibri_model *m, void (*fn)(void *arg, uintptr_t start, uintptr_t end),
                               void *arg) {
    int64_t cap = 3 + (int64_t)m->hp.n_layer * COLIBRI_T_COUNT, n = 0;
    colibri_page_run *runs = malloc((size_t)cap * sizeof *runs);
    if (!runs) return -1;
    for (int64_t i = 0; i < cap; i++) {
        const colibri_tensor *t = i < 3 ? &m->global[i] : &m->layers[(i - 3) / COLIBRI_T_COUNT].t[(i - 3) % COLIBRI_T_COUNT];
        if (!t->data) continue;
        uintptr_t p = (uintptr_t)t->data;
        runs[n++] = (colibri_page_run){(uintptr_t)colibri_page_down(p), (uintptr_t)colibri_page_up(p + colibri_tensor_bytes(t))};
    }
    qsort(runs, (size_t)n, sizeof *runs, colibri_page_run_cmp);
    int64_t total = 0;
    for (int64_t i = 0; i < n;) {
        colibri_page_run run = runs[i++];
        while (i < n && runs[i].start <= run.end) {
            if (runs[i].end > run.end) run.end = runs[i].end;
            i++;
        }
        total += (int64_t)(run.end - run.start);
        if (fn) fn(arg, run.start, run.end);
    }
    free(runs);
    return total;
}

/* ---- what paging costs --------------------------------------------------------------------- */

COLIBRI_API int colibri_model_paging_sizes(const colibri_model *m, int32_t n_batch, colibri_paging_sizes *sizes) {
    if (!m || !sizes || n_batch < 1) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "paging_sizes: need a model, sizes and n_batch >= 1");
    }
    if (!m->finalized) return colibri_error_set(COLIBRI_ERR_STATE, "paging_sizes: model is not finalized");
    int64_t E = m->hp.n_expert, n_moe = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) n_moe += m->layer_is_moe[l];
    if (n_moe == 0) return colibri_error_set(COLIBRI_ERR_INVALID, "paging: the model has no MoE layers");
    int64_t cells = (int64_t)m->hp.n_layer * E;
    colibri_expert_layout *layout = calloc((size_t)cells, sizeof *layout);
    if (!layout) return colibri_error_set(COLIBRI_ERR_NOMEM, "paging_sizes: out of memory");
    memset(sizes, 0, sizeof *sizes);
    int rc = colibri_expert_layouts(m, layout, &sizes->slot_bytes);
    for (int64_t i = 0; !rc && i < cells; i++) {
        colibri_expert_window piece;
        for (int32_t j = 0; colibri_expert_piece(&layout[i], j, &piece) == 0; j++) {
            if (piece.len > sizes->read_bytes) sizes->read_bytes = piece.len;
        }
    }
    free(layout);
    if (rc) return rc;
    int64_t resident = colibri_resident_pages(m, NULL, NULL);
    if (resident < 0) return colibri_error_set(COLIBRI_ERR_NOMEM, "paging_sizes: out of memory");
    sizes->resident_bytes = (uint64_t)resident;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        for (int64_t e = 0; m->layer_is_moe[l] && e < E; e++) {
            const colibri_tensor *w = &m->layers[l].experts[e * COLIBRI_EXPERT_KINDS];
            for (int32_t k = 0; k < COLIBRI_EXPERT_KINDS; k++) sizes->expert_bytes += w[k].data ? colibri_tensor_bytes(&w[k]) : 0;
        }
    }
    sizes->n_experts = n_moe * E;
    /* per (layer, expert): its layout, entry and slot record; per token of a
     * batch: the read-ahead logits (one and two layers ahead); plus the readers' stacks */
    sizes->overhead_bytes = (uint64_t)cells * (sizeof(colibri_expert_layout) + 64) +
                            (uint64_t)sizes->n_experts * (sizeof(colibri_tensor) * COLIBRI_EXPERT_KINDS + 32) +
                            2 * (uint64_t)n_batch * (uint64_t)E * sizeof(float) + ((uint64_t)1 << 20);
    return COLIBRI_OK;
}
