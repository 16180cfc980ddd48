/*
 * expert_io.c — reading experts from their files for the expert cache:
 * positioned reads of each window into its slot, with O_DIRECT where the file
 * system takes it (the page cache never holds the bytes) and, where it does
 * not, buffered reads whose pages are dropped right after (POSIX_FADV_DONTNEED).
 * Also the advice that keeps the model's own mappings from pulling expert
 * bytes into memory once paging is on.
 */
#define _GNU_SOURCE 1   /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "paging.h"
#include "../kernels/quant.h"

#ifndef O_DIRECT
#define O_DIRECT 0   /* systems without it read through the page cache and drop the pages */
#endif

int colibri_expert_files_open(colibri_expert_files *f, const colibri_model *m, int direct, char *err,
                              size_t err_len) {
    int32_t n = m->n_sources;
    memset(f, 0, sizeof *f);
    f->fd = malloc((size_t)n * sizeof(int));
    f->fd_direct = malloc((size_t)n * sizeof(int));
    f->direct_ok = malloc((size_t)n * sizeof(int));
    if (!f->fd || !f->fd_direct || !f->direct_ok) {
        colibri_expert_files_close(f);
        snprintf(err, err_len, "paging: out of memory");
        return -1;
    }
    for (int32_t i = 0; i < n; i++) f->fd[i] = f->fd_direct[i] = -1;
    f->n = n;
    for (int32_t i = 0; i < n; i++) {
        const char *path = m->sources[i].path;
        f->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (f->fd[i] < 0) {
            snprintf(err, err_len, "paging: %s: cannot open (%s)", path, strerror(errno));
            colibri_expert_files_close(f);
            return -1;
        }
        f->fd_direct[i] = direct && O_DIRECT ? open(path, O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
        f->direct_ok[i] = f->fd_direct[i] >= 0;
    }
    return 0;
}

void colibri_expert_files_close(colibri_expert_files *f) {
    for (int32_t i = 0; i < f->n; i++) {
        if (f->fd[i] >= 0) close(f->fd[i]);
        if (f->fd_direct[i] >= 0) close(f->fd_direct[i]);
    }
    free(f->fd);
    free(f->fd_direct);
    free(f->direct_ok);
    memset(f, 0, sizeof *f);
}

int colibri_expert_files_direct(const colibri_expert_files *f) {
    for (int32_t i = 0; i < f->n; i++) {
        if (!__atomic_load_n(&f->direct_ok[i], __ATOMIC_RELAXED)) return 0;
    }
    return f->n > 0;
}

/* pread until len bytes or the end of the file; the bytes read, or -1 (errno). */
static int64_t colibri_pread_all(int fd, char *buf, uint64_t len, uint64_t offset) {
    uint64_t done = 0;
    while (done < len) {
        ssize_t got = pread(fd, buf + done, (size_t)(len - done), (off_t)(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) break;
        done += (uint64_t)got;
    }
    return (int64_t)done;
}

/* One window: O_DIRECT while the file takes it (an EINVAL turns it off for
 * that file for good), else a buffered read and its pages dropped. */
static int colibri_window_read(colibri_expert_files *f, const colibri_model *m, const colibri_expert_window *w,
                               char *buf, uint64_t *bytes, char *err, size_t err_len) {
    int32_t s = w->source;
    int64_t got = -1;
    if (__atomic_load_n(&f->direct_ok[s], __ATOMIC_RELAXED)) {
        got = colibri_pread_all(f->fd_direct[s], buf + w->buf, w->len, w->offset);
        if (got < 0 && errno == EINVAL) __atomic_store_n(&f->direct_ok[s], 0, __ATOMIC_RELAXED);
    }
    if (got < 0 && !__atomic_load_n(&f->direct_ok[s], __ATOMIC_RELAXED)) {
        got = colibri_pread_all(f->fd[s], buf + w->buf, w->len, w->offset);
        if (got >= 0) posix_fadvise(f->fd[s], (off_t)w->offset, (off_t)w->len, POSIX_FADV_DONTNEED);
    }
    if (got < 0) {
        snprintf(err, err_len, "paging: %s: reading %llu bytes at offset %llu failed (%s)", m->sources[s].path,
                 (unsigned long long)w->len, (unsigned long long)w->offset, strerror(errno));
        return -1;
    }
    *bytes += (uint64_t)got;
    if ((uint64_t)got < w->need) {
        snprintf(err, err_len, "paging: %s: the file ends at %llu, inside an expert's bytes (it changed after "
                 "loading?)", m->sources[s].path, (unsigned long long)(w->offset + (uint64_t)got));
        return -1;
    }
    return 0;
}

/* Window w's pieces: how many, and how long each is but the last (whole pages). */
static uint64_t colibri_window_pieces(const colibri_expert_window *w, uint64_t *piece_len) {
    uint64_t pages = w->len / COLIBRI_PAGE_ALIGN, most = COLIBRI_READ_PIECE / COLIBRI_PAGE_ALIGN;
    uint64_t n = pages > most ? (pages + most - 1) / most : 1;
    uint64_t each = pages > n ? (pages + n - 1) / n : 1;   /* pages of every piece but the last */
    *piece_len = each * COLIBRI_PAGE_ALIGN;
    return pages > each ? (pages + each - 1) / each : 1;
}

int32_t colibri_expert_pieces(const colibri_expert_layout *lay) {
    int32_t n = 0;
    uint64_t piece_len;
    for (int32_t i = 0; i < lay->n_win; i++) n += (int32_t)colibri_window_pieces(&lay->win[i], &piece_len);
    return n;
}

int colibri_expert_piece(const colibri_expert_layout *lay, int32_t piece, colibri_expert_window *out) {
    for (int32_t i = 0; i < lay->n_win; i++) {
        const colibri_expert_window *w = &lay->win[i];
        uint64_t piece_len, n = colibri_window_pieces(w, &piece_len);
        if ((uint64_t)piece >= n) {
            piece -= (int32_t)n;
            continue;
        }
        uint64_t at = (uint64_t)piece * piece_len;
        *out = *w;
        out->buf += at;
        out->offset += at;
        out->len = w->len - at < piece_len ? w->len - at : piece_len;
        out->need = w->need <= at ? 0 : w->need - at < out->len ? w->need - at : out->len;
        return 0;
    }
    return -1;
}

int colibri_expert_read_piece(colibri_expert_files *f, const colibri_model *m, const colibri_expert_layout *lay,
                              int32_t piece, char *buf, uint64_t *bytes, char *err, size_t err_len) {
    *bytes = 0;
    colibri_expert_window w;
    if (colibri_expert_piece(lay, piece, &w)) {
        snprintf(err, err_len, "paging: an expert has no read %d", piece);
        return -1;
    }
    return colibri_window_read(f, m, &w, buf, bytes, err, err_len);
}

/* ---- advice on the model's mappings ----------------------------------------------------- */

static void colibri_willneed(void *arg, uintptr_t start, uintptr_t end) {
    (void)arg;
    madvise((void *)start, end - start, MADV_WILLNEED);
}

void colibri_expert_files_advise(const colibri_expert_files *f, const colibri_model *m,
                                 const colibri_expert_layout *layout) {
    /* no huge folios and no read-around on faults: touching a resident
     * weight must not read the expert bytes beside it */
    for (int32_t i = 0; i < m->n_sources; i++) {
        void *base = (void *)m->sources[i].base;
#ifdef MADV_NOHUGEPAGE
        madvise(base, m->sources[i].size, MADV_NOHUGEPAGE);
#endif
        madvise(base, m->sources[i].size, MADV_RANDOM);
    }
    /* drop what loading brought in of the expert bytes (validation touches a
     * page at every tensor boundary), from this process and the page cache */
    int32_t E = m->hp.n_expert;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        for (int32_t e = 0; m->layer_is_moe[l] && e < E; e++) {
            const colibri_expert_layout *lay = &layout[(int64_t)l * E + e];
            for (int32_t w = 0; w < lay->n_win; w++) {
                const colibri_expert_window *win = &lay->win[w];
                const colibri_source *src = &m->sources[win->source];
                uint64_t len = win->offset + win->len > src->size ? src->size - win->offset : win->len;
                madvise((void *)(src->base + win->offset), len, MADV_DONTNEED);
                posix_fadvise(f->fd[win->source], (off_t)win->offset, (off_t)len, POSIX_FADV_DONTNEED);
            }
        }
    }
    /* the resident weights: read ahead now, in large requests, rather than
     * page by page on first use */
    colibri_resident_pages(m, colibri_willneed, NULL);
}
