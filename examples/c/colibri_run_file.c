/*
 * colibri_run_file.c — run a Colibri-native model file from plain C.
 *
 *   colibri_run_file [--slots N] MODEL.colibri N_DECODE TOKEN_ID [TOKEN_ID ...]
 *
 * Loads the file (colibri_init: mmap + validation, zero-copy weights),
 * prefills the prompt ids in one step, then decodes N_DECODE tokens greedily
 * (argmax, ties to the lower id) and prints them on one line:
 *   generated: 12 7 99 ...
 * With --slots N the routed experts are paged instead: read from the file into
 * N expert slots as the routers pick them (docs/PAGING.md; the same tokens),
 * and a second line tells the expert cache's counters:
 *   paging: 40 lookups, 31 hits, 9 misses, 589824 bytes read
 * Exits 1 with colibri_last_error() on any failure, 2 on bad arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

#define RUN_THREADS 2

/* argv[i] as a non-negative int32, or -1. */
static int32_t parse_id(const char *text) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < 0 || v > INT32_MAX) return -1;
    return (int32_t)v;
}

static int32_t argmax(const float *row, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (row[i] > row[best]) best = i;
    }
    return best;
}

/* Prefill ids[0, n_prompt) in one step, then decode n_decode tokens greedily
 * into ids[n_prompt, n_prompt + n_decode). pos, seq: [n_prompt] scratch. */
static int generate(colibri_context *ctx, int32_t *ids, int32_t *pos, int32_t *seq, int32_t n_prompt,
                    int32_t n_decode) {
    int32_t n_vocab = colibri_context_hparams(ctx)->n_vocab;
    float *logits = (float *)malloc((size_t)n_vocab * sizeof(float));   /* logits: [n_vocab] */
    if (!logits) return 1;
    for (int32_t i = 0; i < n_prompt; i++) {
        pos[i] = i;
        seq[i] = 0;
    }
    colibri_outputs out = {logits, NULL, NULL, NULL};
    colibri_batch batch = {n_prompt, ids, pos, seq, NULL};   /* logits of the last token only */
    int rc = 0;
    for (int32_t n = n_prompt; n < n_prompt + n_decode; n++) {
        if ((rc = colibri_forward(ctx, &batch, &out))) break;
        ids[n] = argmax(logits, n_vocab);
        pos[0] = n;
        batch = (colibri_batch){1, &ids[n], &pos[0], seq, NULL};
    }
    free(logits);
    return rc;
}

/* A context for path with n_slots expert slots (its model owned by it, as
 * colibri_init's): the file mapped for paging, the slot arena, the readers. */
static colibri_context *init_paged(const char *path, int32_t n_ctx, int32_t n_slots) {
    colibri_model *m = colibri_model_load_flags(path, COLIBRI_LOAD_PAGED);
    colibri_context *ctx = m ? colibri_context_create(m, n_ctx, 1, n_ctx < 512 ? n_ctx : 512, RUN_THREADS) : NULL;
    colibri_paging_options opt = {n_slots, 2, 1, 1, 0};   /* 2 readers, read-ahead, O_DIRECT */
    if (ctx && colibri_context_page_experts(ctx, &opt) == COLIBRI_OK) return ctx;
    if (ctx) colibri_free(ctx);
    else colibri_model_free(m);
    return NULL;
}

int main(int argc, char **argv) {
    int32_t n_slots = 0;
    if (argc > 2 && strcmp(argv[1], "--slots") == 0) {
        n_slots = parse_id(argv[2]);
        if (n_slots < 1) {
            fprintf(stderr, "colibri_run_file: bad --slots '%s'\n", argv[2]);
            return 2;
        }
        argc -= 2;
        argv += 2;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: %s [--slots N] MODEL.colibri N_DECODE TOKEN_ID [TOKEN_ID ...]\n", argv[0]);
        return 2;
    }
    int32_t n_decode = parse_id(argv[2]);
    int32_t n_prompt = argc - 3;
    if (n_decode < 0) {
        fprintf(stderr, "colibri_run_file: bad N_DECODE '%s'\n", argv[2]);
        return 2;
    }
    for (int32_t i = 0; i < n_prompt; i++) {
        if (parse_id(argv[3 + i]) < 0) {
            fprintf(stderr, "colibri_run_file: bad token id '%s'\n", argv[3 + i]);
            return 2;
        }
    }
    colibri_context *ctx = n_slots ? init_paged(argv[1], n_prompt + n_decode + 1, n_slots)
                                   : colibri_init(argv[1], n_prompt + n_decode + 1, RUN_THREADS);
    if (!ctx) {
        fprintf(stderr, "colibri_run_file: %s\n", colibri_last_error());
        return 1;
    }
    int32_t *ids = (int32_t *)malloc((size_t)(n_prompt + n_decode) * sizeof(int32_t));  /* ids: [n_prompt + n_decode] */
    int32_t *pos = (int32_t *)malloc((size_t)n_prompt * sizeof(int32_t));              /* pos: [n_prompt] */
    int32_t *seq = (int32_t *)malloc((size_t)n_prompt * sizeof(int32_t));              /* seq: [n_prompt] */
    int rc = ids && pos && seq ? 0 : 1;
    for (int32_t i = 0; !rc && i < n_prompt; i++) ids[i] = parse_id(argv[3 + i]);
    if (!rc) rc = generate(ctx, ids, pos, seq, n_prompt, n_decode);
    if (rc) {
        fprintf(stderr, "colibri_run_file: %s\n", ids && pos && seq ? colibri_last_error() : "out of memory");
    } else {
        printf("generated:");
        for (int32_t i = n_prompt; i < n_prompt + n_decode; i++) printf(" %d", ids[i]);
        printf("\n");
        colibri_paging_stats st;
        if (n_slots && colibri_paging_stats_read(ctx, &st, 0) == COLIBRI_OK) {
            printf("paging: %lld lookups, %lld hits, %lld misses, %lld bytes read\n", (long long)st.lookups,
                   (long long)st.hits, (long long)st.misses, (long long)st.bytes_read);
        }
    }
    free(ids);
    free(pos);
    free(seq);
    colibri_free(ctx);
    return rc ? 1 : 0;
}
