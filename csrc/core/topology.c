/*
 * topology.c — the CPUs, physical cores and NUMA nodes this process may use
 * (Linux sysfs and the affinity mask), and the plan that gives each pool
 * thread its CPU (topology.h). Everything read is checked: a file that is
 * missing or malformed leaves the CPU on its own core or node 0, never a
 * failure, since containers often hide parts of sysfs.
 */
#define _GNU_SOURCE 1   /* sched_getaffinity, sched_getcpu, CPU_ISSET, syscall */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "topology.h"

#define COLIBRI_CPU_LIMIT 4096   /* CPU numbers read from sysfs are below this */

/* ---- sysfs cpu lists ("0-3,8,10-11") ---------------------------------------- */

long colibri_text_read(const char *path, char *text, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t len = fread(text, 1, size - 1, f);
    fclose(f);
    text[len] = '\0';
    return (long)len;
}

/* Reads the cpu list file at path into bits (a bit per CPU number below
 * COLIBRI_CPU_LIMIT); 0 on success, -1 if the file is missing or malformed. */
static int colibri_cpulist_read(const char *path, uint64_t *bits) {
    char text[4096];
    if (colibri_text_read(path, text, sizeof text) < 0) return -1;
    memset(bits, 0, COLIBRI_CPU_LIMIT / 8);
    const char *p = text;
    while (*p && *p != '\n') {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0 || lo >= COLIBRI_CPU_LIMIT) return -1;
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || hi < lo || hi >= COLIBRI_CPU_LIMIT) return -1;
            p = end;
        }
        for (long c = lo; c <= hi; c++) bits[c / 64] |= 1ull << (c % 64);
        if (*p == ',') p++;
        else if (*p && *p != '\n') return -1;
    }
    return 0;
}

static int colibri_bit(const uint64_t *bits, int32_t c) { return (int)((bits[c / 64] >> (c % 64)) & 1); }

/* The lowest CPU number in bits, or -1. */
static int32_t colibri_bits_first(const uint64_t *bits) {
    for (int32_t c = 0; c < COLIBRI_CPU_LIMIT; c++) {
        if (colibri_bit(bits, c)) return c;
    }
    return -1;
}

/* ---- reading ------------------------------------------------------------------ */

int colibri_topology_read(const char *root, const uint64_t *allowed, int32_t n_allowed, colibri_topology *t) {
    memset(t, 0, sizeof *t);
    uint64_t online[COLIBRI_CPU_LIMIT / 64], list[COLIBRI_CPU_LIMIT / 64];
    char path[1024];
    snprintf(path, sizeof path, "%s/cpu/online", root);
    if (colibri_cpulist_read(path, online) != 0) {
        memset(online, 0, sizeof online);
        online[0] = 1;   /* unknown: CPU 0 alone */
    }
    int32_t n = 0;
    for (int32_t c = 0; c < COLIBRI_CPU_LIMIT; c++) {
        int ok = colibri_bit(online, c) && (!allowed || (c < n_allowed && colibri_bit(allowed, c)));
        if (!ok) online[c / 64] &= ~(1ull << (c % 64));
        n += ok;
    }
    if (n == 0) return colibri_error_set(COLIBRI_ERR_INVALID, "topology: no online CPU in %s is allowed", root);
    t->cpus = (colibri_cpu *)calloc((size_t)n, sizeof *t->cpus);
    if (!t->cpus) return colibri_error_set(COLIBRI_ERR_NOMEM, "topology: out of memory");
    for (int32_t c = 0; c < COLIBRI_CPU_LIMIT; c++) {
        if (!colibri_bit(online, c)) continue;
        colibri_cpu *cpu = &t->cpus[t->n_cpus++];
        cpu->id = c;
        cpu->core = c;
        snprintf(path, sizeof path, "%s/cpu/cpu%d/topology/core_cpus_list", root, c);
        int have = colibri_cpulist_read(path, list) == 0;
        if (!have) {
            snprintf(path, sizeof path, "%s/cpu/cpu%d/topology/thread_siblings_list", root, c);
            have = colibri_cpulist_read(path, list) == 0;
        }
        if (have && colibri_bit(list, c)) {
            cpu->core = colibri_bits_first(list);
            for (int32_t s = cpu->core; s < c; s++) cpu->smt += colibri_bit(list, s);
        }
    }
    /* nodes: root/node/nodeN/cpulist for N in 0..; absent → node 0 */
    for (int32_t node = 0; node < COLIBRI_CPU_LIMIT; node++) {
        snprintf(path, sizeof path, "%s/node/node%d/cpulist", root, node);
        if (colibri_cpulist_read(path, list) != 0) continue;
        for (int32_t i = 0; i < t->n_cpus; i++) {
            if (colibri_bit(list, t->cpus[i].id)) t->cpus[i].node = node;
        }
    }
    /* count cores (SMT rank 0 of each) and distinct nodes among the allowed CPUs */
    uint64_t nodes[COLIBRI_CPU_LIMIT / 64] = {0};
    for (int32_t i = 0; i < t->n_cpus; i++) {
        const colibri_cpu *cpu = &t->cpus[i];
        int first = 1;   /* the first allowed CPU of its core (a sibling may be excluded) */
        for (int32_t j = 0; j < i; j++) first &= t->cpus[j].core != cpu->core;
        t->n_cores += first;
        if (!colibri_bit(nodes, cpu->node)) t->n_nodes++;
        nodes[cpu->node / 64] |= 1ull << (cpu->node % 64);
    }
    /* renumber SMT ranks among the allowed CPUs of each core, so rank 0 always exists */
    for (int32_t i = 0; i < t->n_cpus; i++) {
        t->cpus[i].smt = 0;
        for (int32_t j = 0; j < i; j++) t->cpus[i].smt += t->cpus[j].core == t->cpus[i].core;
    }
    return COLIBRI_OK;
}

int colibri_topology_this_process(colibri_topology *t) {
    cpu_set_t set;
    uint64_t allowed[COLIBRI_CPU_LIMIT / 64] = {0};
    if (sched_getaffinity(0, sizeof set, &set) != 0) return colibri_topology_read("/sys/devices/system", NULL, 0, t);
    for (int32_t c = 0; c < COLIBRI_CPU_LIMIT && c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) allowed[c / 64] |= 1ull << (c % 64);
    }
    return colibri_topology_read("/sys/devices/system", allowed, COLIBRI_CPU_LIMIT, t);
}

void colibri_topology_free(colibri_topology *t) {
    free(t->cpus);
    memset(t, 0, sizeof *t);
}

/* ---- planning ----------------------------------------------------------------- */

int32_t colibri_topology_node_of(const colibri_topology *t, int32_t cpu) {
    for (int32_t i = 0; i < t->n_cpus; i++) {
        if (t->cpus[i].id == cpu) return t->cpus[i].node;
    }
    return 0;
}

static int colibri_cpu_usable(const colibri_cpu *cpu, int32_t mode, int32_t home_node) {
    return mode != COLIBRI_PLACE_ISOLATE || cpu->node == home_node;
}

/* ISOLATE on a home node without any allowed CPU places as CORES does. */
static int32_t colibri_mode_effective(const colibri_topology *t, int32_t mode, int32_t home_node) {
    if (mode != COLIBRI_PLACE_ISOLATE) return mode;
    for (int32_t i = 0; i < t->n_cpus; i++) {
        if (t->cpus[i].node == home_node) return mode;
    }
    return COLIBRI_PLACE_CORES;
}

int32_t colibri_topology_cores(const colibri_topology *t, int32_t mode, int32_t home_node) {
    int32_t n = 0;
    mode = colibri_mode_effective(t, mode, home_node);
    for (int32_t i = 0; i < t->n_cpus; i++) n += t->cpus[i].smt == 0 && colibri_cpu_usable(&t->cpus[i], mode, home_node);
    return n > 0 ? n : 1;
}

int colibri_topology_plan(const colibri_topology *t, int32_t mode, int32_t home_node, int32_t n_threads,
                          int32_t *cpus) {
    int32_t n = 0, max_smt = 0, max_node = 0;
    for (int32_t i = 0; i < t->n_cpus; i++) {
        max_smt = t->cpus[i].smt > max_smt ? t->cpus[i].smt : max_smt;
        max_node = t->cpus[i].node > max_node ? t->cpus[i].node : max_node;
    }
    mode = colibri_mode_effective(t, mode, home_node);
    for (int32_t smt = 0; smt <= max_smt && n < n_threads; smt++) {
        if (mode == COLIBRI_PLACE_DISTRIBUTE) {
            /* the k-th CPU of this rank on each node in turn */
            for (int32_t k = 0, placed = 1; placed && n < n_threads; k++) {
                placed = 0;
                for (int32_t node = 0; node <= max_node && n < n_threads; node++) {
                    int32_t seen = 0;
                    for (int32_t i = 0; i < t->n_cpus; i++) {
                        const colibri_cpu *cpu = &t->cpus[i];
                        if (cpu->smt != smt || cpu->node != node) continue;
                        if (seen++ == k) {
                            cpus[n++] = cpu->id;
                            placed = 1;
                            break;
                        }
                    }
                }
            }
        } else {
            for (int32_t node = 0; node <= max_node && n < n_threads; node++) {
                for (int32_t i = 0; i < t->n_cpus && n < n_threads; i++) {
                    const colibri_cpu *cpu = &t->cpus[i];
                    if (cpu->smt == smt && cpu->node == node && colibri_cpu_usable(cpu, mode, home_node)) {
                        cpus[n++] = cpu->id;
                    }
                }
            }
        }
    }
    int own = n == n_threads;
    for (int32_t i = n; i < n_threads; i++) cpus[i] = n > 0 ? cpus[i % n] : 0;
    return own && n > 0;
}

/* ---- this process ------------------------------------------------------------------ */

int colibri_placement_plan(int32_t mode, int32_t n_threads, colibri_thread_plan *plan) {
    memset(plan, 0, sizeof *plan);
    if (mode < COLIBRI_PLACE_CORES || mode > COLIBRI_PLACE_NONE) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "placement must be %d..%d (colibri_placement), got %d",
                                 COLIBRI_PLACE_CORES, COLIBRI_PLACE_NONE, mode);
    }
    colibri_topology t;
    if (colibri_topology_this_process(&t) != COLIBRI_OK) return COLIBRI_ERR_INVALID;
    int cpu = sched_getcpu();
    int32_t home = colibri_topology_node_of(&t, cpu >= 0 ? cpu : 0);
    if (n_threads <= 0) {   /* a core each, no more than the CPU quota lets run at once */
        int32_t cores = colibri_topology_cores(&t, mode, home);
        int32_t quota = colibri_cpu_quota("/proc/self/cgroup", "/proc/self/mountinfo");
        n_threads = quota > 0 && quota < cores ? quota : cores;
        n_threads = n_threads < COLIBRI_MAX_THREADS ? n_threads : COLIBRI_MAX_THREADS;
    }
    plan->n_threads = n_threads;
    plan->n_nodes = t.n_nodes;
    plan->cpus = (int32_t *)malloc((size_t)n_threads * sizeof *plan->cpus);
    plan->nodes = (int32_t *)malloc((size_t)n_threads * sizeof *plan->nodes);
    if (!plan->cpus || !plan->nodes) {
        colibri_topology_free(&t);
        colibri_thread_plan_free(plan);
        return colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory planning %d threads", n_threads);
    }
    int own = colibri_topology_plan(&t, mode, home, n_threads, plan->cpus);
    for (int32_t i = 0; i < n_threads; i++) plan->nodes[i] = colibri_topology_node_of(&t, plan->cpus[i]);
    plan->pin = own && n_threads > 1 && mode != COLIBRI_PLACE_NONE;
    colibri_topology_free(&t);
    return COLIBRI_OK;
}

void colibri_thread_plan_free(colibri_thread_plan *plan) {
    free(plan->cpus);
    free(plan->nodes);
    memset(plan, 0, sizeof *plan);
}

/* ---- memory --------------------------------------------------------------------------- */

#define COLIBRI_MPOL_BIND 2         /* linux/mempolicy.h: allocate on these nodes only */
#define COLIBRI_MPOL_INTERLEAVE 3   /* page by page over these nodes */

int colibri_numa_bind(void *addr, size_t len, const int32_t *nodes, int32_t n) {
#if defined(__linux__) && defined(SYS_mbind)
    uint64_t mask[COLIBRI_CPU_LIMIT / 64] = {0};
    int32_t distinct = 0;
    for (int32_t i = 0; i < n; i++) {
        if (nodes[i] < 0 || nodes[i] >= COLIBRI_CPU_LIMIT) return -1;
        distinct += !colibri_bit(mask, nodes[i]);
        mask[nodes[i] / 64] |= 1ull << (nodes[i] % 64);
    }
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)addr + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);   /* whole pages inside */
    uintptr_t hi = ((uintptr_t)addr + len) & ~((uintptr_t)page - 1);
    if (distinct == 0 || hi <= lo) return 0;
    int mode = distinct > 1 ? COLIBRI_MPOL_INTERLEAVE : COLIBRI_MPOL_BIND;
    return syscall(SYS_mbind, (void *)lo, (unsigned long)(hi - lo), mode, mask,
                   (unsigned long)COLIBRI_CPU_LIMIT, 0u) == 0 ? 0 : -1;
#else
    (void)addr, (void)len, (void)nodes, (void)n;
    return -1;
#endif
}
