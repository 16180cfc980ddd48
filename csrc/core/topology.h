/*
 * topology.h — where a context's threads run (internal): the machine's CPUs,
 * physical cores and NUMA nodes read from Linux sysfs, and the plan that gives
 * each pool thread its CPU (docs/KERNELS.md, "Threads, cores and NUMA nodes").
 *
 * A plan lists CPUs in the order threads take them: one hardware thread of
 * every physical core first (SMT siblings only once every core has a thread),
 * so the default thread count — the number of physical cores the process may
 * use, capped by its cgroup CPU quota — never puts two threads on one core.
 */
#ifndef COLIBRI_TOPOLOGY_H
#define COLIBRI_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

typedef struct colibri_cpu {
    int32_t id;      /* the CPU number (sysfs cpuN, sched_setaffinity's bit) */
    int32_t core;    /* the lowest CPU number of its physical core: one value per core */
    int32_t node;    /* its NUMA node (0 where sysfs lists none) */
    int32_t smt;     /* its rank among its core's hardware threads: 0 for the first */
} colibri_cpu;

typedef struct colibri_topology {
    int32_t n_cpus;      /* CPUs this process may run on */
    int32_t n_cores;     /* their physical cores */
    int32_t n_nodes;     /* their NUMA nodes */
    colibri_cpu *cpus;   /* cpus: [n_cpus] by CPU number */
} colibri_topology;

/* Reads the CPUs of `root` (a sysfs tree: root/cpu/online, root/cpu/cpuN/
 * topology/{core_cpus_list or thread_siblings_list}, root/node/nodeN/cpulist)
 * that are also in `allowed` (a bit per CPU number, n_allowed bits; NULL: all
 * online CPUs). A CPU without topology files is its own core; without node
 * directories every CPU is on node 0. Returns COLIBRI_OK, or an error when
 * no CPU is left (t is then empty). Free with colibri_topology_free. */
int colibri_topology_read(const char *root, const uint64_t *allowed, int32_t n_allowed, colibri_topology *t);
/* This process's topology: /sys/devices/system within its CPU affinity mask. */
int colibri_topology_this_process(colibri_topology *t);
void colibri_topology_free(colibri_topology *t);

/* The physical cores a pool placed in `mode` (colibri_placement) may use:
 * every core, or those of home_node for COLIBRI_PLACE_ISOLATE. */
int32_t colibri_topology_cores(const colibri_topology *t, int32_t mode, int32_t home_node);
/* cpus: [n_threads] the CPU of each thread (thread 0 the caller's): the CPUs
 * the mode allows, first SMT rank 0 of every core, then rank 1, ...; within a
 * rank node after node (COLIBRI_PLACE_CORES, ISOLATE: home_node only) or one
 * core of each node in turn (DISTRIBUTE). Returns 1 when every thread has a
 * CPU of its own (pinning makes sense), 0 when there are more threads than
 * CPUs (cpus then wraps around and the pool should not pin). */
int colibri_topology_plan(const colibri_topology *t, int32_t mode, int32_t home_node, int32_t n_threads,
                          int32_t *cpus);
/* The node of CPU `cpu` (0 if unknown). */
int32_t colibri_topology_node_of(const colibri_topology *t, int32_t cpu);

/* A pool's threads as this process would place them. */
typedef struct colibri_thread_plan {
    int32_t n_threads;   /* the count asked for, or the default (cores the mode may use) */
    int32_t pin;         /* 1: pin thread i to cpus[i] (more than one thread, each on a CPU of its own) */
    int32_t n_nodes;     /* NUMA nodes this process may use */
    int32_t *cpus;       /* cpus: [n_threads] */
    int32_t *nodes;      /* nodes: [n_threads] the node of cpus[i] */
} colibri_thread_plan;
/* Plans n_threads (<= 0: the default) threads placed in `mode` on this
 * process's CPUs (its affinity mask, sysfs). Free with colibri_thread_plan_free. */
int colibri_placement_plan(int32_t mode, int32_t n_threads, colibri_thread_plan *plan);
void colibri_thread_plan_free(colibri_thread_plan *plan);

/* The start of the file at path, NUL-terminated, in text[size] (size >= 1): its length, or -1
 * if it cannot be opened. */
long colibri_text_read(const char *path, char *text, size_t size);

/* The CPUs' worth of time the cgroup CPU quota of this process allows: ceil(quota / period),
 * the tightest over its cgroup and every ancestor (v2 cpu.max, v1 cpu.cfs_quota_us and
 * cpu.cfs_period_us), at most COLIBRI_QUOTA_CPUS_MAX; 0 where none is set or readable.
 * proc_cgroup, mountinfo: the files to read (/proc/self/cgroup, /proc/self/mountinfo; the
 * tests pass fakes). The default thread count is capped by it (colibri_placement_plan). */
#define COLIBRI_QUOTA_CPUS_MAX (1 << 20)
int32_t colibri_cpu_quota(const char *proc_cgroup, const char *mountinfo);

/* Binds the whole pages inside [addr, addr + len) of an anonymous mapping,
 * before they are first touched, to nodes[0..n) (Linux mbind: MPOL_BIND for
 * one distinct node, MPOL_INTERLEAVE for several). 0 on success, -1 where the
 * system has no mbind or refuses (the pages then go where first touched). */
int colibri_numa_bind(void *addr, size_t len, const int32_t *nodes, int32_t n);

#endif /* COLIBRI_TOPOLOGY_H */
