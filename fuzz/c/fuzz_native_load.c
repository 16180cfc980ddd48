/*
 * fuzz_native_load.c — libFuzzer harness: a .colibri file (docs/FORMAT.md) from the fuzzer's
 * bytes through colibri_model_load, then, when it loads, a context and two forward steps with
 * every output asked for (logits, router logits, experts, gates), each buffer sized from the
 * model's own hparams (colibri_model_hparams), as a C user sizes them.
 *
 * The file lives in a memfd (a regular file, no disk) opened through /proc/self/fd.
 * A structure-aware mutator (native_mutator.h) keeps the header and layout valid half the
 * time, so mutations reach the hparams, the directory and the forward pass.
 */
#define _GNU_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "colibri.h"
#include "native_mutator.h"

/* Forward steps: 3 tokens of sequence 0 plus 1 of sequence 1, then one more token each. */
static void fuzz_run(colibri_model *m) {
    const colibri_hparams *hp = colibri_model_hparams(m);
    colibri_context *ctx = colibri_context_create(m, 8, 2, 4, 1);
    if (!ctx) return;
    int64_t L = hp->n_layer, E = hp->n_expert, k = hp->n_expert_used, V = hp->n_vocab;
    float *logits = malloc((size_t)(4 * V) * sizeof(float));           /* logits: [4, V] */
    float *router = malloc((size_t)(L * 4 * E + 1) * sizeof(float));   /* router: [L, 4, E] */
    int32_t *experts = malloc((size_t)(L * 4 * k + 1) * sizeof(int32_t));  /* experts: [L, 4, k] */
    float *gates = malloc((size_t)(L * 4 * k + 1) * sizeof(float));    /* gates: [L, 4, k] */
    if (logits && router && experts && gates) {
        int32_t token[4] = {0, (int32_t)(V - 1), (int32_t)(V / 2), 1 % V};
        int32_t pos[4] = {0, 1, 2, 0}, seq[4] = {0, 0, 0, 1};
        int8_t want[4] = {1, 1, 1, 1};
        colibri_batch batch = {.n_tokens = 4, .token = token, .pos = pos, .seq = seq, .want_logits = want};
        colibri_outputs out = {.logits = logits, .router_logits = router, .experts = experts, .gates = gates};
        if (colibri_forward(ctx, &batch, &out) == COLIBRI_OK) {
            int32_t token2[2] = {token[1], token[0]}, pos2[2] = {3, 1}, seq2[2] = {0, 1};
            colibri_batch step = {.n_tokens = 2, .token = token2, .pos = pos2, .seq = seq2};
            colibri_forward(ctx, &step, &out);
        }
    }
    free(logits);
    free(router);
    free(experts);
    free(gates);
    colibri_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("colibri-fuzz", MFD_CLOEXEC);
    if (fd < 0) abort();
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) abort();
        done += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    colibri_model *m = colibri_model_load(path);
    close(fd);   /* the model keeps its own mapping */
    if (m) {
        fuzz_run(m);
        colibri_model_free(m);
    } else if (colibri_last_error()[0] == 0) {
        abort();   /* a refusal must say why */
    }
    return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    return colibri_native_mutate(data, size, max_size, seed);
}
