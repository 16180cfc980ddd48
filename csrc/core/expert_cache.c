/*
 * expert_cache.c — the expert cache of a paging context (docs/PAGING.md).
 *
 * A fixed arena of n_slots expert slots; a table of every (layer, expert):
 * its slot, use count and last use; a queue of slots to read, served by
 * reader threads (urgent reads before read-ahead), each slot's read cut in
 * pieces that several readers share (expert_io.c): the reads a layer waits on
 * first, then read-ahead by the layer it is for, soonest first, then read-ahead
 * for layers already past. One mutex guards the
 * table, the slots' states and the queue; only the forward step's thread
 * changes which expert a slot holds, so every eviction is a deterministic
 * function of the routing (the readers only move slots from QUEUED to READY):
 * the same inputs leave the same experts cached, and the logits never depend
 * on any of it.
 *
 * A MoE layer step: colibri_paging_layer_begin counts the uses, gives every
 * needed expert without a slot one (a free slot, else the victim: lowest use
 * count, then least recently used, then lowest (layer, expert); never pinned,
 * never needed by this step, held for a coming layer only when nothing else
 * is left) and queues its read; predicts the next one or two MoE layers'
 * experts from this layer's input and reads them ahead into slots nobody needs
 * now, holding them for their layer; then waits for the wave: every
 * needed expert that has a slot. Experts that got none (more needed than
 * slots) wait for the next wave, after the slots of the one before are free.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"
#include "paging.h"
#include "profile.h"

#define COLIBRI_IO_THREADS_DEFAULT 4
#define COLIBRI_AGING_DEFAULT 256
#define COLIBRI_HUGE_PAGE ((size_t)2 << 20)
#define COLIBRI_READER_STACK ((size_t)256 << 10)

enum { SLOT_EMPTY, SLOT_QUEUED, SLOT_LOADING, SLOT_READY };

typedef struct colibri_slot {
    colibri_tensor t[COLIBRI_EXPERT_KINDS];   /* the expert's weights, data inside this slot */
    int64_t owner;        /* l * n_expert + e of the expert held, -1 when empty */
    int32_t n_pieces;     /* the expert's reads (colibri_expert_pieces) */
    int32_t next_piece;   /* the first piece no reader has taken */
    int32_t pieces_left;  /* pieces not read yet (taken or not) */
    uint64_t piece_bytes; /* bytes its finished pieces read; they reach the stats with the last piece */
    uint8_t state;        /* SLOT_*: QUEUED until a reader takes a piece, LOADING until all are read */
    uint8_t urgent;       /* a layer waits on this read */
    uint8_t ahead;        /* read ahead and not needed since */
    uint8_t demand;       /* filled for a layer that needed it (not read ahead) */
    uint8_t failed;       /* the read failed (error in the cache's line) */
} colibri_slot;

typedef struct colibri_expert_entry {
    int64_t slot;         /* -1 when not cached */
    int64_t last_use;     /* tick of its last use or read */
    uint32_t uses;        /* tokens that used it, halved every aging period */
    uint8_t pinned;
    uint8_t want;         /* needed by the current layer step, not yet run */
    uint8_t hold;         /* predicted for its layer's coming step (read ahead, or found cached) */
    uint8_t wave;         /* part of the current wave */
} colibri_expert_entry;

typedef struct colibri_prediction {
    int32_t count;        /* tokens whose predicted top-k holds the expert */
    int32_t expert;
} colibri_prediction;

struct colibri_paging {
    const colibri_model *m;
    int32_t E, k;
    int32_t first_moe;            /* the first MoE layer: where a step's tokens are counted */
    int32_t *next_moe;            /* next_moe: [n_layer] the MoE layer after l, -1 at the last */
    colibri_expert_layout *layout;   /* layout: [n_layer * E] */
    colibri_expert_entry *entry;     /* entry: [n_layer * E] */
    colibri_slot *slots;          /* slots: [n_slots] */
    int64_t n_slots;
    uint64_t slot_bytes;
    char *arena;                  /* arena: [n_slots, slot_bytes] the experts' bytes */
    size_t arena_len;
    int huge;
    int64_t *free_slots;          /* free_slots: [n_slots] stack of empty slots, lowest on top */
    int64_t n_free;
    int64_t *queue;               /* queue: [n_slots] slots with pieces no reader has taken, in order */
    int64_t n_queued;
    colibri_expert_files files;
    pthread_t *readers;           /* readers: [n_readers] */
    uint64_t forks;               /* colibri_fork_generation() when the readers started */
    int32_t n_readers;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t work;          /* the queue got a slot, or stop */
    pthread_cond_t done;          /* a read finished */
    int64_t tick;                 /* tokens run so far */
    int32_t aging;
    int32_t prefetch;             /* read-ahead depth: 0 off, 1 the next MoE layer, 2 the next two */
    int32_t cur_layer;            /* the layer whose step began last (read-ahead for it or before is stale) */
    int64_t pinned;
    int32_t *need;                /* need: [E] the current layer's needed experts, in order */
    int32_t n_need;
    int32_t *pending;             /* pending: [E] needed experts still without a slot */
    int32_t n_pending;
    float *pred_logits;           /* pred_logits: [2, n_batch, E] the next two routers on this layer's input */
    int64_t pred_stride;          /* n_batch * E: one router's logits in pred_logits */
    int32_t *pred_top;            /* pred_top: [k] one token's predicted experts */
    float *pred_gates;            /* pred_gates: [k] their gates (unused) */
    colibri_prediction *pred;     /* pred: [E] */
    uint8_t *predicted;           /* predicted: [n_layer * E] predicted for layer l's coming step, bit d:
                                     by the layer d + 1 MoE layers before */
    uint8_t *has_prediction;      /* has_prediction: [n_layer] the same bits: which predictions it has */
    colibri_paging_stats stats;
    int failed;
    char error[320];              /* the first failed read of the current step */
};

/* ---- readers ------------------------------------------------------------------------ */

/* How soon slot s's read is needed (lower first): 0 a layer waits on it;
 * read-ahead, how many layers ahead of the current one its layer is; a
 * read-ahead whose layer has begun without needing it, last. Under mu. */
static int64_t colibri_queue_rank(const colibri_paging *p, int64_t s) {
    const colibri_slot *slot = &p->slots[s];
    if (slot->urgent) return 0;
    int64_t layer = slot->owner / p->E;
    return layer > p->cur_layer ? layer - p->cur_layer : INT64_MAX;
}

/* Takes the next piece of the queued slot needed soonest (colibri_queue_rank;
 * ties in queue order); a slot leaves the queue with its last piece. Under mu. */
static int64_t colibri_queue_pop(colibri_paging *p, int32_t *piece) {
    int64_t at = 0, best = colibri_queue_rank(p, p->queue[0]);
    for (int64_t i = 1; i < p->n_queued && best > 0; i++) {
        int64_t rank = colibri_queue_rank(p, p->queue[i]);
        if (rank < best) at = i, best = rank;
    }
    int64_t s = p->queue[at];
    colibri_slot *slot = &p->slots[s];
    *piece = slot->next_piece++;
    slot->state = SLOT_LOADING;
    if (slot->next_piece == slot->n_pieces) {
        memmove(&p->queue[at], &p->queue[at + 1], (size_t)(p->n_queued - at - 1) * sizeof *p->queue);
        p->n_queued--;
    }
    return s;
}

/* Removes slot s from the queue (a queued read that is no longer wanted). Under mu. */
static void colibri_queue_remove(colibri_paging *p, int64_t s) {
    for (int64_t at = 0; at < p->n_queued; at++) {
        if (p->queue[at] != s) continue;
        memmove(&p->queue[at], &p->queue[at + 1], (size_t)(p->n_queued - at - 1) * sizeof *p->queue);
        p->n_queued--;
        return;
    }
}

static void *colibri_reader_main(void *arg) {
    colibri_paging *p = (colibri_paging *)arg;
    char err[sizeof p->error];
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->n_queued == 0) pthread_cond_wait(&p->work, &p->mu);
        if (p->stop) break;
        int32_t piece;
        int64_t s = colibri_queue_pop(p, &piece);
        colibri_slot *slot = &p->slots[s];
        const colibri_expert_layout *lay = &p->layout[slot->owner];
        pthread_mutex_unlock(&p->mu);
        uint64_t bytes = 0;
        int rc = colibri_expert_read_piece(&p->files, p->m, lay, piece, p->arena + (size_t)s * p->slot_bytes, &bytes,
                                           err, sizeof err);
        pthread_mutex_lock(&p->mu);
        if (rc && !slot->failed) {
            slot->failed = 1;
            if (!p->failed) {
                p->failed = 1;
                memcpy(p->error, err, sizeof err);
            }
        }
        slot->piece_bytes += bytes;
        if (--slot->pieces_left == 0) {
            p->stats.bytes_read += (int64_t)slot->piece_bytes;   /* whole reads only: a stats snapshot never splits one */
            slot->state = SLOT_READY;
            pthread_cond_broadcast(&p->done);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- slots --------------------------------------------------------------------------- */

/* Whether cached expert a should be evicted before b: fewer uses, then
 * older last use, then lower (layer, expert). */
static int colibri_evict_before(const colibri_paging *p, int64_t a, int64_t b) {
    const colibri_expert_entry *x = &p->entry[a], *y = &p->entry[b];
    if (x->uses != y->uses) return x->uses < y->uses;
    if (x->last_use != y->last_use) return x->last_use < y->last_use;
    return a < b;
}

/* Waits (under mu) until slot s has no read in flight (a reader has taken a
 * piece: the rest stay queued and are read); time counts as stall. */
static void colibri_slot_settle(colibri_paging *p, int64_t s) {
    if (p->slots[s].state != SLOT_LOADING) return;
    double t0 = colibri_now();
    while (p->slots[s].state == SLOT_LOADING) pthread_cond_wait(&p->done, &p->mu);
    p->stats.stall_seconds += colibri_now() - t0;
}

/* Empties slot s (under mu, no read in flight). */
static void colibri_slot_clear(colibri_paging *p, int64_t s) {
    colibri_slot *slot = &p->slots[s];
    if (slot->owner >= 0) p->entry[slot->owner].slot = -1;
    memset(slot, 0, sizeof *slot);
    slot->owner = -1;
    slot->state = SLOT_EMPTY;
}

/* A slot to fill (under mu): an empty one, else the victim among the cached
 * experts nobody needs now — for a read-ahead, never one held for a coming
 * layer; for a layer that needs it (demand), held ones only when nothing else
 * is left, so a layer always gets slots as with no read-ahead. -1 when there
 * is none. */
static int64_t colibri_slot_take(colibri_paging *p, int demand) {
    if (p->n_free > 0) return p->free_slots[--p->n_free];
    int64_t victim = -1;
    for (int64_t s = 0; s < p->n_slots; s++) {
        int64_t owner = p->slots[s].owner;
        const colibri_expert_entry *en = &p->entry[owner];
        if (en->pinned || en->want || en->wave || (en->hold && !demand)) continue;
        if (victim >= 0) {
            uint8_t held = p->entry[p->slots[victim].owner].hold;
            if (en->hold > held || (en->hold == held && !colibri_evict_before(p, owner, p->slots[victim].owner))) {
                continue;
            }
        }
        victim = s;
    }
    if (victim < 0) return -1;
    if (p->slots[victim].state == SLOT_QUEUED) colibri_queue_remove(p, victim);
    colibri_slot_settle(p, victim);
    colibri_slot_clear(p, victim);
    return victim;
}

/* Gives expert `owner` slot s and queues its read (under mu). */
static void colibri_slot_fill(colibri_paging *p, int64_t s, int64_t owner, int urgent) {
    colibri_slot *slot = &p->slots[s];
    const colibri_tensor *w = &p->m->layers[owner / p->E].experts[(owner % p->E) * COLIBRI_EXPERT_KINDS];
    char *base = p->arena + (size_t)s * p->slot_bytes;
    for (int32_t k = 0; k < COLIBRI_EXPERT_KINDS; k++) {
        slot->t[k] = w[k];
        if (w[k].data) slot->t[k].data = base + p->layout[owner].at[k];
    }
    slot->owner = owner;
    slot->n_pieces = slot->pieces_left = colibri_expert_pieces(&p->layout[owner]);
    slot->next_piece = 0;
    slot->piece_bytes = 0;
    slot->state = SLOT_QUEUED;
    slot->urgent = (uint8_t)urgent;
    slot->ahead = (uint8_t)!urgent;
    slot->demand = (uint8_t)urgent;
    slot->failed = 0;
    p->entry[owner].slot = s;
    p->entry[owner].last_use = p->tick;
    p->queue[p->n_queued++] = s;
    p->stats.reads++;
    pthread_cond_broadcast(&p->work);   /* every idle reader can take a piece */
}

/* Slots for the pending experts of layer l, in order, while there are any (under mu). */
static void colibri_assign_pending(colibri_paging *p, int32_t l) {
    int32_t done = 0;
    while (done < p->n_pending) {
        int64_t s = colibri_slot_take(p, 1);
        if (s < 0) break;
        colibri_slot_fill(p, s, (int64_t)l * p->E + p->pending[done++], 1);
    }
    memmove(p->pending, p->pending + done, (size_t)(p->n_pending - done) * sizeof *p->pending);
    p->n_pending -= done;
}

/* Waits (under mu) for layer l's next wave and makes it: when every needed
 * expert has a slot, those whose reads are done (waiting only while none
 * is), so that the step computes on them while the others arrive; else every
 * needed expert with a slot (the waves for want of slots stay a function of
 * the routing alone). Which wave an expert runs in never changes its output
 * (moe.c). A failed read drops its expert from the step. */
static void colibri_wave_gather(colibri_context *ctx, int32_t l) {
    colibri_paging *p = ctx->paging;
    int split = p->n_pending == 0;
    double t0 = 0.0;
    int waiting = 0, ahead_only = 1;
    for (;;) {
        int32_t left = 0, ready = 0, demand_left = 0;
        for (int32_t i = 0; i < p->n_need; i++) {
            const colibri_expert_entry *en = &p->entry[(int64_t)l * p->E + p->need[i]];
            if (!en->want || en->slot < 0) continue;
            left++;
            if (p->slots[en->slot].state == SLOT_READY) ready++;
            else demand_left |= p->slots[en->slot].demand;
        }
        if (ready == left) break;
        if (split && ready > 0) {
            p->stats.early_waves++;
            break;
        }
        if (!waiting) {
            t0 = colibri_now();
            waiting = 1;
            colibri_threadpool_nap(ctx->pool);   /* no pool run before a read is done */
            ahead_only = !demand_left;
        }
        pthread_cond_wait(&p->done, &p->mu);
    }
    if (waiting) {
        double waited = colibri_now() - t0;
        p->stats.stall_seconds += waited;
        if (ahead_only) p->stats.stall_ahead_seconds += waited;
    }
    for (int32_t i = 0; i < p->n_need; i++) {
        int64_t owner = (int64_t)l * p->E + p->need[i];
        colibri_expert_entry *en = &p->entry[owner];
        if (!en->want || en->slot < 0 || p->slots[en->slot].state != SLOT_READY) continue;
        if (p->slots[en->slot].failed) {   /* the step reports it (colibri_paging_step_status) */
            int64_t s = en->slot;
            en->want = 0;
            colibri_slot_clear(p, s);
            p->free_slots[p->n_free++] = s;
            continue;
        }
        en->wave = 1;
    }
}

/* ---- read-ahead ------------------------------------------------------------------------ */

static int colibri_prediction_cmp(const void *a, const void *b) {
    const colibri_prediction *x = (const colibri_prediction *)a, *y = (const colibri_prediction *)b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->expert < y->expert ? -1 : x->expert > y->expert;
}

int colibri_paging_predict_jobs(colibri_context *ctx, int32_t l, int32_t T, colibri_matmul_job *jobs) {
    colibri_paging *p = ctx->paging;
    int32_t n = 0;
    for (int32_t next = p ? p->next_moe[l] : -1; p && n < p->prefetch && next >= 0; next = p->next_moe[next], n++) {
        jobs[n] = (colibri_matmul_job){.w = &p->m->layers[next].t[COLIBRI_T_ROUTER], .x = ctx->s.h,
                                       .x_stride = p->m->hp.n_embd, .y = p->pred_logits + n * p->pred_stride,
                                       .y_stride = p->E, .n = T};   /* pred_logits[n]: [T, E] */
    }
    return n;
}

/* The experts layer `next`'s router picks from layer l's input: its logits
 * (logits: [T, E], computed with layer l's router: colibri_paging_predict_jobs),
 * bias and routing rule (router.c) applied to each token, the picks counted
 * over the tokens; sorted by count. Runs outside mu (the step's own scratch:
 * the router's work arrays are free once layer l has routed). Returns how
 * many experts were predicted. */
static int32_t colibri_predict(colibri_context *ctx, int32_t next, int32_t T, float *logits) {
    colibri_paging *p = ctx->paging;
    const colibri_model *m = p->m;
    const colibri_layer *N = &m->layers[next];
    colibri_scratch *s = &ctx->s;
    int32_t E = p->E, k = p->k;
    if (m->hp.router_bias) {
        const float *b = colibri_vec_load(ctx, &N->t[COLIBRI_T_ROUTER_BIAS]);   /* b: [E] */
        for (int64_t i = 0; i < (int64_t)T * E; i++) logits[i] += b[i % E];
    }
    const float *sel_bias = m->hp.router_sel_bias ? colibri_vec_load(ctx, &N->t[COLIBRI_T_ROUTER_SEL_BIAS])
                                                  : NULL;   /* sel_bias: [E] */
    for (int32_t e = 0; e < E; e++) p->pred[e] = (colibri_prediction){0, e};
    for (int32_t t = 0; t < T; t++) {
        colibri_router_select(&m->router, logits + (int64_t)t * E, sel_bias, s->router_work,
                              s->router_iwork, p->pred_top, p->pred_gates);
        for (int32_t slot = 0; slot < k; slot++) p->pred[p->pred_top[slot]].count++;
    }
    qsort(p->pred, (size_t)E, sizeof *p->pred, colibri_prediction_cmp);
    int32_t n = 0;
    while (n < E && p->pred[n].count > 0) n++;
    return n;
}

/* Records the prediction for layer `next`, made `ahead` MoE layers before it
 * (1 or 2), holds its experts for that layer and reads ahead those not
 * cached, into slots nobody needs now, most predicted first (under mu). */
static void colibri_read_ahead(colibri_paging *p, int32_t next, int32_t n_pred, int32_t ahead) {
    uint8_t bit = (uint8_t)(1u << (ahead - 1));
    p->has_prediction[next] |= bit;
    *(ahead == 1 ? &p->stats.predicted : &p->stats.predicted2) += n_pred;
    for (int32_t i = 0; i < n_pred; i++) {
        int64_t owner = (int64_t)next * p->E + p->pred[i].expert;
        p->predicted[owner] |= bit;
        p->entry[owner].hold = 1;
    }
    for (int32_t i = 0; i < n_pred; i++) {
        int64_t owner = (int64_t)next * p->E + p->pred[i].expert;
        if (p->entry[owner].slot >= 0) continue;
        int64_t s = colibri_slot_take(p, 0);
        if (s < 0) break;
        colibri_slot_fill(p, s, owner, 0);
        p->stats.prefetches++;
    }
}

/* ---- the forward pass's hooks ------------------------------------------------------------ */

/* Counts a step's tokens at its first MoE layer; halves every use count once
 * per aging period crossed (under mu). */
static void colibri_count_tokens(colibri_paging *p, int32_t T) {
    int64_t before = p->tick / p->aging;
    p->tick += T;
    p->stats.tokens += T;
    int64_t periods = p->tick / p->aging - before;
    if (periods == 0) return;
    int64_t cells = (int64_t)p->m->hp.n_layer * p->E;
    for (int64_t i = 0; i < cells; i++) p->entry[i].uses = periods >= 32 ? 0 : p->entry[i].uses >> periods;
}

void colibri_paging_layer_begin(colibri_context *ctx, int32_t l, int32_t T) {
    colibri_paging *p = ctx->paging;
    if (!p) return;
    const int32_t *count = ctx->s.expert_count;   /* count: [E] tokens per expert this step */
    int32_t E = p->E;
    pthread_mutex_lock(&p->mu);
    if (l == p->first_moe) colibri_count_tokens(p, T);
    p->cur_layer = l;
    p->n_need = p->n_pending = 0;
    uint8_t had = p->has_prediction[l];
    for (int32_t e = 0; e < E; e++) {
        int64_t owner = (int64_t)l * E + e;
        colibri_expert_entry *en = &p->entry[owner];
        en->hold = 0;
        if (count[e] == 0) continue;
        p->need[p->n_need++] = e;
        en->uses = en->uses > UINT32_MAX - (uint32_t)count[e] ? UINT32_MAX : en->uses + (uint32_t)count[e];
        en->last_use = p->tick;
        en->want = 1;
        p->stats.lookups++;
        if (had & 1) {
            p->stats.needed_after_prediction++;
            p->stats.predicted_needed += p->predicted[owner] & 1;
        }
        if (had & 2) {
            p->stats.needed_after_prediction2++;
            p->stats.predicted2_needed += (p->predicted[owner] >> 1) & 1;
        }
        if (en->slot < 0) {
            p->stats.misses++;
            p->pending[p->n_pending++] = e;
            continue;
        }
        colibri_slot *slot = &p->slots[en->slot];
        p->stats.hits++;
        slot->urgent = 1;
        if (slot->ahead) {
            p->stats.prefetch_used++;
            slot->ahead = 0;
        }
    }
    p->has_prediction[l] = 0;
    memset(p->predicted + (int64_t)l * E, 0, (size_t)E);
    colibri_assign_pending(p, l);
    int32_t next = p->next_moe[l];
    if (p->prefetch && next >= 0 && p->n_pending == 0) {
        /* the next layer first (its reads queue before the one after's); the
         * one after only while this layer's experts and the two predictions
         * fill at most half the slots not pinned (a prefill chunk in a small
         * cache would evict its guesses before their layer came) */
        int64_t room = p->n_slots - p->pinned, taken = p->n_need;
        for (int32_t ahead = 1; ahead <= p->prefetch && next >= 0; ahead++, next = p->next_moe[next]) {
            pthread_mutex_unlock(&p->mu);   /* the readers work while the prediction is computed */
            int32_t n_pred = colibri_predict(ctx, next, T, p->pred_logits + (ahead - 1) * p->pred_stride);
            pthread_mutex_lock(&p->mu);
            taken += n_pred;
            if (ahead > 1 && 2 * taken > room) break;
            colibri_read_ahead(p, next, n_pred, ahead);
        }
        colibri_profile_mark(ctx, COLIBRI_STAGE_ROUTER, l);
    }
    colibri_wave_gather(ctx, l);
    pthread_mutex_unlock(&p->mu);
    colibri_profile_mark(ctx, COLIBRI_STAGE_EXPERT_WAIT, l);
}

const colibri_tensor *colibri_expert_weights(const colibri_context *ctx, int32_t l, int32_t e) {
    const colibri_paging *p = ctx->paging;
    if (!p) return &ctx->model->layers[l].experts[(int64_t)e * COLIBRI_EXPERT_KINDS];
    const colibri_expert_entry *en = &p->entry[(int64_t)l * p->E + e];
    return en->wave ? p->slots[en->slot].t : NULL;
}

int colibri_paging_next_wave(colibri_context *ctx, int32_t l) {
    colibri_paging *p = ctx->paging;
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    int left = 0;   /* needed experts with a slot, not run yet (still being read) */
    for (int32_t i = 0; i < p->n_need; i++) {
        colibri_expert_entry *en = &p->entry[(int64_t)l * p->E + p->need[i]];
        if (en->wave) en->wave = en->want = 0;
        else left |= en->want && en->slot >= 0;
    }
    int more = p->n_pending > 0 || left;
    if (p->n_pending > 0) {
        p->stats.waves++;
        colibri_assign_pending(p, l);
    }
    if (more) colibri_wave_gather(ctx, l);
    pthread_mutex_unlock(&p->mu);
    if (more) colibri_profile_mark(ctx, COLIBRI_STAGE_EXPERT_WAIT, l);
    return more;
}

int colibri_paging_step_status(colibri_context *ctx) {
    colibri_paging *p = ctx->paging;
    if (!p) return COLIBRI_OK;
    pthread_mutex_lock(&p->mu);
    int failed = p->failed;
    char error[sizeof p->error];
    memcpy(error, p->error, sizeof error);
    p->failed = 0;
    pthread_mutex_unlock(&p->mu);
    return failed ? colibri_error_set(COLIBRI_ERR_IO, "%s", error) : COLIBRI_OK;
}

/* ---- public API ------------------------------------------------------------------------------ */

int colibri_paging_check_process(const colibri_paging *p) {
    if (!p || !p->readers || p->forks == colibri_fork_generation()) return COLIBRI_OK;
    return colibri_error_set(COLIBRI_ERR_STATE, "forward: this context pages its experts with reader threads "
                             "that stayed in the process it was made in; after fork(), load the model again");
}

void colibri_paging_free(colibri_paging *p) {
    if (!p) return;
    /* a fork() child has no reader to stop, and one may have held the mutex at the fork */
    int here = !p->readers || p->forks == colibri_fork_generation();
    if (p->readers && here) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
        for (int32_t i = 0; i < p->n_readers; i++) pthread_join(p->readers[i], NULL);
    }
    if (here) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->work);
        pthread_cond_destroy(&p->done);
    }
    colibri_expert_files_close(&p->files);
    if (p->arena) munmap(p->arena, p->arena_len);
    free(p->readers);
    free(p->next_moe);
    free(p->layout);
    free(p->entry);
    free(p->slots);
    free(p->free_slots);
    free(p->queue);
    free(p->need);
    free(p->pending);
    free(p->pred_logits);
    free(p->pred_top);
    free(p->pred_gates);
    free(p->pred);
    free(p->predicted);
    free(p->has_prediction);
    free(p);
}

/* The slot arena: n_slots * slot_bytes, anonymous, transparent huge pages
 * asked for (accounted like any memory, unlike hugetlbfs pages). */
static int colibri_paging_arena(colibri_paging *p) {
    if ((uint64_t)p->n_slots > (SIZE_MAX - COLIBRI_HUGE_PAGE) / p->slot_bytes) {
        return colibri_error_set(COLIBRI_ERR_NOMEM, "paging: %lld slots of %llu bytes do not fit the address space",
                                 (long long)p->n_slots, (unsigned long long)p->slot_bytes);
    }
    size_t len = ((size_t)p->n_slots * p->slot_bytes + COLIBRI_HUGE_PAGE - 1) & ~(COLIBRI_HUGE_PAGE - 1);
    void *arena = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) {
        return colibri_error_set(COLIBRI_ERR_NOMEM, "paging: cannot map the slot arena of %zu bytes (%s)", len,
                                 strerror(errno));
    }
    p->arena = arena;
    p->arena_len = len;
#ifdef MADV_HUGEPAGE
    p->huge = madvise(arena, len, MADV_HUGEPAGE) == 0;
#endif
    return COLIBRI_OK;
}

/* Allocates the tables and counts the MoE layers; ctx's model is finalized. */
static int colibri_paging_tables(colibri_paging *p, const colibri_context *ctx, int64_t n_slots) {
    const colibri_model *m = ctx->model;
    int32_t L = m->hp.n_layer, E = p->E;
    int64_t cells = (int64_t)L * E;
    p->first_moe = -1;
    p->next_moe = malloc((size_t)L * sizeof *p->next_moe);
    p->layout = calloc((size_t)cells, sizeof *p->layout);
    p->entry = calloc((size_t)cells, sizeof *p->entry);
    p->predicted = calloc((size_t)cells, 1);
    p->has_prediction = calloc((size_t)L, 1);
    p->need = malloc((size_t)E * sizeof *p->need);
    p->pending = malloc((size_t)E * sizeof *p->pending);
    p->pred = malloc((size_t)E * sizeof *p->pred);
    p->pred_top = malloc((size_t)p->k * sizeof *p->pred_top);
    p->pred_gates = malloc((size_t)p->k * sizeof *p->pred_gates);
    p->pred_stride = (int64_t)ctx->n_batch * E;
    p->pred_logits = malloc(2 * (size_t)p->pred_stride * sizeof *p->pred_logits);
    if (!p->next_moe || !p->layout || !p->entry || !p->predicted || !p->has_prediction || !p->need ||
        !p->pending || !p->pred || !p->pred_top || !p->pred_gates || !p->pred_logits) {
        return colibri_error_set(COLIBRI_ERR_NOMEM, "paging: out of memory");
    }
    int32_t next = -1;
    for (int32_t l = L - 1; l >= 0; l--) {
        p->next_moe[l] = next;
        if (m->layer_is_moe[l]) next = p->first_moe = l;
    }
    for (int64_t i = 0; i < cells; i++) p->entry[i].slot = -1;
    int rc = colibri_expert_layouts(m, p->layout, &p->slot_bytes);
    if (rc) return rc;
    int64_t n_experts = 0;
    for (int32_t l = 0; l < L; l++) n_experts += m->layer_is_moe[l] ? E : 0;
    p->n_slots = n_slots < n_experts ? n_slots : n_experts;   /* more slots than experts would stay empty */
    size_t n = p->n_slots > 0 ? (size_t)p->n_slots : 1;
    p->slots = calloc(n, sizeof *p->slots);
    p->free_slots = malloc(n * sizeof *p->free_slots);
    p->queue = malloc(n * sizeof *p->queue);
    if (!p->slots || !p->free_slots || !p->queue) return colibri_error_set(COLIBRI_ERR_NOMEM, "paging: out of memory");
    for (int64_t s = 0; s < p->n_slots; s++) {
        p->slots[s].owner = -1;
        p->free_slots[s] = p->n_slots - 1 - s;   /* slot 0 on top */
    }
    p->n_free = p->n_slots;
    return COLIBRI_OK;
}

static int colibri_paging_start_readers(colibri_paging *p, int32_t n) {
    p->forks = colibri_fork_generation();
    p->readers = calloc((size_t)n, sizeof *p->readers);
    if (!p->readers) return colibri_error_set(COLIBRI_ERR_NOMEM, "paging: out of memory");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, COLIBRI_READER_STACK);
    int rc = COLIBRI_OK;
    for (; p->n_readers < n; p->n_readers++) {
        if (pthread_create(&p->readers[p->n_readers], &attr, colibri_reader_main, p) != 0) {
            rc = colibri_error_set(COLIBRI_ERR_NOMEM, "paging: cannot start reader thread %d", p->n_readers);
            break;
        }
    }
    pthread_attr_destroy(&attr);
    return rc;
}

static int colibri_host_little_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static int colibri_context_page_experts_claimed(colibri_context *ctx, const colibri_paging_options *opt);

COLIBRI_API int colibri_context_page_experts(colibri_context *ctx, const colibri_paging_options *opt) {
    if (!ctx || !opt) return colibri_error_set(COLIBRI_ERR_INVALID, "page_experts: context and options must be set");
    if (!colibri_context_claim(ctx, "page_experts")) return COLIBRI_ERR_STATE;
    int rc = colibri_context_page_experts_claimed(ctx, opt);
    colibri_context_release(ctx);
    return rc;
}

/* colibri_context_page_experts on a context this thread has claimed. */
static int colibri_context_page_experts_claimed(colibri_context *ctx, const colibri_paging_options *opt) {
    if (ctx->paging) return colibri_error_set(COLIBRI_ERR_STATE, "page_experts: the context already pages its experts");
    if (opt->n_slots < 1) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "page_experts: n_slots must be >= 1, got %lld",
                                 (long long)opt->n_slots);
    }
    if (opt->prefetch < 0 || opt->prefetch > 2) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "page_experts: prefetch must be 0, 1 or 2, got %d",
                                 opt->prefetch);
    }
    if (!colibri_host_little_endian()) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "page_experts: paging needs a little-endian host");
    }
    const colibri_model *m = ctx->model;
    int any_moe = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) any_moe |= m->layer_is_moe[l];
    if (!any_moe) return colibri_error_set(COLIBRI_ERR_INVALID, "page_experts: the model has no MoE layers");
    colibri_paging *p = calloc(1, sizeof *p);
    if (!p) return colibri_error_set(COLIBRI_ERR_NOMEM, "page_experts: out of memory");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->m = m;
    p->E = m->hp.n_expert;
    p->k = m->hp.n_expert_used;
    p->aging = opt->aging_tokens > 0 ? opt->aging_tokens : COLIBRI_AGING_DEFAULT;
    p->prefetch = opt->prefetch;
    char err[sizeof p->error];
    int rc = colibri_paging_tables(p, ctx, opt->n_slots);
    if (!rc && colibri_expert_files_open(&p->files, m, opt->direct_io != 0, err, sizeof err)) {
        rc = colibri_error_set(COLIBRI_ERR_IO, "%s", err);
    }
    if (!rc) rc = colibri_paging_arena(p);
    if (!rc) rc = colibri_paging_start_readers(p, opt->n_io_threads > 0 ? opt->n_io_threads : COLIBRI_IO_THREADS_DEFAULT);
    if (rc) {
        colibri_paging_free(p);
        return rc;
    }
    colibri_expert_files_advise(&p->files, m, p->layout);
    ctx->paging = p;
    return COLIBRI_OK;
}

static int colibri_paging_pin_claimed(colibri_context *ctx, const int32_t *layers, const int32_t *experts, int32_t n);

COLIBRI_API int colibri_paging_pin(colibri_context *ctx, const int32_t *layers, const int32_t *experts, int32_t n) {
    if (ctx && !colibri_context_claim(ctx, "paging_pin")) return COLIBRI_ERR_STATE;
    int rc = colibri_paging_pin_claimed(ctx, layers, experts, n);
    if (ctx) colibri_context_release(ctx);
    return rc;
}

/* colibri_paging_pin on a context this thread has claimed (or NULL). */
static int colibri_paging_pin_claimed(colibri_context *ctx, const int32_t *layers, const int32_t *experts, int32_t n) {
    colibri_paging *p = ctx ? ctx->paging : NULL;
    if (!p) return colibri_error_set(COLIBRI_ERR_STATE, "paging_pin: the context does not page its experts");
    if (n < 0 || (n > 0 && (!layers || !experts))) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "paging_pin: need n >= 0 layers and experts");
    }
    int64_t fresh = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t l = layers[i], e = experts[i];
        if (l < 0 || l >= p->m->hp.n_layer || !p->m->layer_is_moe[l] || e < 0 || e >= p->E) {
            return colibri_error_set(COLIBRI_ERR_INVALID, "paging_pin: (layer %d, expert %d) is not a routed expert "
                                     "of this model", l, e);
        }
        fresh += !p->entry[(int64_t)l * p->E + e].pinned;
    }
    if (p->pinned + fresh > p->n_slots - 1) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "paging_pin: %lld pinned experts would leave no free slot "
                                 "(%lld slots)", (long long)(p->pinned + fresh), (long long)p->n_slots);
    }
    pthread_mutex_lock(&p->mu);
    for (int32_t i = 0; i < n; i++) {
        int64_t owner = (int64_t)layers[i] * p->E + experts[i];
        colibri_expert_entry *en = &p->entry[owner];
        if (en->pinned) continue;
        if (en->slot < 0) colibri_slot_fill(p, colibri_slot_take(p, 1), owner, 1);   /* fresh < free slots */
        en->pinned = 1;
        p->pinned++;
    }
    int failed = 0;
    for (int32_t i = 0; i < n; i++) {
        colibri_expert_entry *en = &p->entry[(int64_t)layers[i] * p->E + experts[i]];
        if (en->slot < 0) continue;   /* a repeat whose read already failed */
        while (p->slots[en->slot].state != SLOT_READY) pthread_cond_wait(&p->done, &p->mu);
        if (!p->slots[en->slot].failed) continue;
        int64_t s = en->slot;
        failed = 1;
        en->pinned = 0;
        p->pinned--;
        colibri_slot_clear(p, s);
        p->free_slots[p->n_free++] = s;
    }
    p->failed = 0;
    char error[sizeof p->error];
    memcpy(error, p->error, sizeof error);
    pthread_mutex_unlock(&p->mu);
    return failed ? colibri_error_set(COLIBRI_ERR_IO, "%s", error) : COLIBRI_OK;
}

COLIBRI_API int colibri_paging_stats_read(colibri_context *ctx, colibri_paging_stats *stats, int reset) {
    colibri_paging *p = ctx ? ctx->paging : NULL;
    if (!p) return colibri_error_set(COLIBRI_ERR_STATE, "paging_stats: the context does not page its experts");
    if (!stats) return colibri_error_set(COLIBRI_ERR_INVALID, "paging_stats: stats is NULL");
    pthread_mutex_lock(&p->mu);
    p->stats.n_slots = p->n_slots;
    p->stats.slot_bytes = (int64_t)p->slot_bytes;
    p->stats.pinned = p->pinned;
    p->stats.direct_io = colibri_expert_files_direct(&p->files);
    p->stats.huge_pages = p->huge;
    *stats = p->stats;
    if (reset) memset(&p->stats, 0, sizeof p->stats);
    pthread_mutex_unlock(&p->mu);
    return COLIBRI_OK;
}

COLIBRI_API int colibri_paging_residency(const colibri_context *ctx, uint8_t *state) {
    colibri_paging *p = ctx ? ctx->paging : NULL;
    if (!p) return colibri_error_set(COLIBRI_ERR_STATE, "paging_residency: the context does not page its experts");
    if (!state) return colibri_error_set(COLIBRI_ERR_INVALID, "paging_residency: state is NULL");
    pthread_mutex_lock(&p->mu);
    int64_t cells = (int64_t)p->m->hp.n_layer * p->E;
    for (int64_t i = 0; i < cells; i++) state[i] = p->entry[i].slot < 0 ? 0 : p->entry[i].pinned ? 2 : 1;
    pthread_mutex_unlock(&p->mu);
    return COLIBRI_OK;
}
