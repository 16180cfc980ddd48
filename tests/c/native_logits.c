/*
 * native_logits.c — the logits of a Colibri-native file, printed exactly
 * (tests/test_big_endian.py runs it on the host and, cross-compiled, under
 * big-endian emulation).
 *
 *   native_logits MODEL.colibri TOKEN_ID [TOKEN_ID ...]
 *
 * Loads the file (colibri_init), runs the ids as one batch at positions
 * 0, 1, ... asking for every token's logits, and prints "isa NAME" then one
 * line per token: its n_vocab logits as the hex of their float bits (the
 * host's integer value of the bits, so the text is the same on any byte
 * order). Exits 1 with colibri_last_error() on any failure (an id out of
 * the vocabulary included), 2 without arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.colibri TOKEN_ID [TOKEN_ID ...]\n", argv[0]);
        return 2;
    }
    int32_t n = argc - 2;
    colibri_context *ctx = colibri_init(argv[1], n, 1);
    if (!ctx) {
        fprintf(stderr, "native_logits: %s\n", colibri_last_error());
        return 1;
    }
    int32_t n_vocab = colibri_context_hparams(ctx)->n_vocab;
    int32_t *ids = (int32_t *)malloc((size_t)n * sizeof(int32_t));               /* ids: [n] */
    int32_t *pos = (int32_t *)malloc((size_t)n * sizeof(int32_t));               /* pos: [n] */
    int32_t *seq = (int32_t *)calloc((size_t)n, sizeof(int32_t));                /* seq: [n] */
    int8_t *want = (int8_t *)malloc((size_t)n);                                  /* want: [n] */
    float *logits = (float *)malloc((size_t)n * (size_t)n_vocab * sizeof(float)); /* logits: [n, n_vocab] */
    int rc = 1;
    if (!ids || !pos || !seq || !want || !logits) {
        fprintf(stderr, "native_logits: out of memory\n");
    } else {
        for (int32_t i = 0; i < n; i++) {
            ids[i] = (int32_t)strtol(argv[2 + i], NULL, 10);
            pos[i] = i;
            want[i] = 1;
        }
        colibri_batch batch = {n, ids, pos, seq, want};
        colibri_outputs out = {logits, NULL, NULL, NULL};
        rc = colibri_forward(ctx, &batch, &out);
        if (rc) fprintf(stderr, "native_logits: %s\n", colibri_last_error());
    }
    if (!rc) {
        printf("isa %s\n", colibri_isa());
        for (int32_t i = 0; i < n; i++) {
            for (int32_t v = 0; v < n_vocab; v++) {
                uint32_t bits;
                memcpy(&bits, &logits[(size_t)i * (size_t)n_vocab + (size_t)v], sizeof bits);
                printf("%s%08x", v ? " " : "", (unsigned)bits);
            }
            printf("\n");
        }
    }
    free(ids);
    free(pos);
    free(seq);
    free(want);
    free(logits);
    colibri_free(ctx);
    return rc ? 1 : 0;
}
