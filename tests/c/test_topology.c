/*
 * test_topology.c — the CPU topology reader and the thread placement plans
 * (csrc/core/topology.c) on fake sysfs trees written here: a two-socket Intel
 * numbering (SMT siblings 8 apart, two NUMA nodes), an AMD numbering
 * (siblings adjacent, thread_siblings_list only), a container that hides
 * the topology files, a malformed online list and an affinity mask that
 * leaves out CPUs; then this machine's own tree and an mbind of one node; and
 * the cgroup CPU quota reader on fake /proc files and cgroup trees.
 * Prints "N passed, M failed"; exit 1 on failure.
 */
#define _GNU_SOURCE 1   /* mkdtemp, MAP_ANONYMOUS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri.h"
#include "internal.h"
#include "topology.h"

#include "check.h"

static char root[256];

/* Writes text to root/rel, creating its directories. */
static void fake_write(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void fake_clear(void) {
    char command[1400];
    snprintf(command, sizeof command, "rm -rf '%s'/cpu '%s'/node '%s'/proc '%s'/fs", root, root, root, root);
    CHECK(system(command) == 0, "clear the fake tree");
}

/* cpus[0..n) == want[0..n). */
static int same(const int32_t *cpus, const int32_t *want, int n) {
    for (int i = 0; i < n; i++) {
        if (cpus[i] != want[i]) return 0;
    }
    return 1;
}

/* Two sockets x 4 cores x 2 threads, Intel order: CPU c < 8 and c + 8 share a
 * core; node 0 holds cores 0-3, node 1 cores 4-7. */
static void test_two_sockets(void) {
    fake_clear();
    fake_write("cpu/online", "0-15\n");
    for (int c = 0; c < 16; c++) {
        char rel[128], list[32];
        snprintf(rel, sizeof rel, "cpu/cpu%d/topology/core_cpus_list", c);
        snprintf(list, sizeof list, "%d,%d\n", c % 8, c % 8 + 8);
        fake_write(rel, list);
    }
    fake_write("node/node0/cpulist", "0-3,8-11\n");
    fake_write("node/node1/cpulist", "4-7,12-15\n");
    colibri_topology t;
    CHECK(colibri_topology_read(root, NULL, 0, &t) == COLIBRI_OK, "read: %s", colibri_last_error());
    CHECK(t.n_cpus == 16 && t.n_cores == 8 && t.n_nodes == 2, "16 CPUs, 8 cores, 2 nodes (got %d, %d, %d)",
          t.n_cpus, t.n_cores, t.n_nodes);
    CHECK(t.cpus[9].core == 1 && t.cpus[9].smt == 1 && t.cpus[9].node == 0, "CPU 9: core 1, second thread, node 0");
    CHECK(t.cpus[12].core == 4 && t.cpus[12].node == 1, "CPU 12: core 4, node 1");
    CHECK(colibri_topology_cores(&t, COLIBRI_PLACE_CORES, 0) == 8, "8 cores by default");
    CHECK(colibri_topology_cores(&t, COLIBRI_PLACE_ISOLATE, 1) == 4, "4 cores on node 1");

    int32_t cpus[24];
    int32_t cores6[6] = {0, 1, 2, 3, 4, 5};
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_CORES, 0, 6, cpus) == 1 && same(cpus, cores6, 6),
          "cores: node 0's cores, then node 1's");
    int32_t spread6[6] = {0, 4, 1, 5, 2, 6};
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_DISTRIBUTE, 0, 6, cpus) == 1 && same(cpus, spread6, 6),
          "distribute: one core of each node in turn");
    int32_t home5[5] = {4, 5, 6, 7, 12};
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_ISOLATE, 1, 5, cpus) == 1 && same(cpus, home5, 5),
          "isolate on node 1: its 4 cores, then an SMT sibling");
    int32_t all16[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_CORES, 0, 16, cpus) == 1 && same(cpus, all16, 16),
          "16 threads: every core, then every sibling");
    int32_t spread10[10] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12};
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_DISTRIBUTE, 0, 10, cpus) == 1 && same(cpus, spread10, 10),
          "distribute past the cores: siblings, nodes still in turn");
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_CORES, 0, 20, cpus) == 0 && cpus[16] == cpus[0],
          "more threads than CPUs: not pinnable, the plan wraps");
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_ISOLATE, 3, 2, cpus) == 1 && cpus[0] == 0 && cpus[1] == 1,
          "isolate on a node without CPUs: every node");
    colibri_topology_free(&t);

    /* an affinity mask without core 1 (CPUs 1 and 9) and without CPU 0 alone */
    uint64_t allowed = 0xffffull & ~(1ull << 1) & ~(1ull << 9) & ~(1ull << 0);
    CHECK(colibri_topology_read(root, &allowed, 64, &t) == COLIBRI_OK, "read with a mask");
    CHECK(t.n_cpus == 13 && t.n_cores == 7, "13 CPUs on 7 cores (got %d, %d)", t.n_cpus, t.n_cores);
    int32_t masked4[4] = {2, 3, 8, 10};   /* CPU 8 stands for core 0; then the siblings */
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_ISOLATE, 0, 4, cpus) == 1 && same(cpus, masked4, 4),
          "a core whose first thread is masked is still one core (got %d %d %d %d)", cpus[0], cpus[1], cpus[2],
          cpus[3]);
    colibri_topology_free(&t);
}

/* One socket, 3 cores x 2 threads, AMD order (siblings adjacent), only
 * thread_siblings_list, no node directory. */
static void test_adjacent_siblings(void) {
    fake_clear();
    fake_write("cpu/online", "0-5\n");
    for (int c = 0; c < 6; c++) {
        char rel[128], list[32];
        snprintf(rel, sizeof rel, "cpu/cpu%d/topology/thread_siblings_list", c);
        snprintf(list, sizeof list, "%d-%d\n", c & ~1, (c & ~1) + 1);
        fake_write(rel, list);
    }
    colibri_topology t;
    CHECK(colibri_topology_read(root, NULL, 0, &t) == COLIBRI_OK, "read: %s", colibri_last_error());
    CHECK(t.n_cpus == 6 && t.n_cores == 3 && t.n_nodes == 1, "6 CPUs, 3 cores, 1 node");
    int32_t cpus[6], want[6] = {0, 2, 4, 1, 3, 5};
    CHECK(colibri_topology_plan(&t, COLIBRI_PLACE_CORES, 0, 6, cpus) == 1 && same(cpus, want, 6),
          "first threads of the cores, then their siblings");
    colibri_topology_free(&t);
}

/* A container that shows only cpu/online (and a malformed one after). */
static void test_hidden_and_malformed(void) {
    fake_clear();
    fake_write("cpu/online", "0,2-3\n");
    colibri_topology t;
    CHECK(colibri_topology_read(root, NULL, 0, &t) == COLIBRI_OK, "read: %s", colibri_last_error());
    CHECK(t.n_cpus == 3 && t.n_cores == 3 && t.n_nodes == 1 && t.cpus[1].id == 2,
          "no topology files: every CPU its own core, node 0");
    colibri_topology_free(&t);
    const char *bad[] = {"0-\n", "3-1\n", "x\n", "0,,1\n", "99999\n"};
    for (int i = 0; i < 5; i++) {
        fake_write("cpu/online", bad[i]);
        CHECK(colibri_topology_read(root, NULL, 0, &t) == COLIBRI_OK && t.n_cpus == 1 && t.cpus[0].id == 0,
              "malformed online list '%.5s': CPU 0 alone", bad[i]);
        colibri_topology_free(&t);
    }
    uint64_t none = 0;
    fake_write("cpu/online", "0-3\n");
    CHECK(colibri_topology_read(root, &none, 64, &t) == COLIBRI_ERR_INVALID && t.n_cpus == 0,
          "an empty affinity mask is an error");
}

/* This machine: the plan the contexts use, and mbind of one node. */
static void test_this_machine(void) {
    colibri_topology t;
    CHECK(colibri_topology_this_process(&t) == COLIBRI_OK && t.n_cpus >= 1 && t.n_cores >= 1 && t.n_nodes >= 1,
          "this process's topology");
    colibri_topology_free(&t);
    colibri_thread_plan plan;
    CHECK(colibri_placement_plan(COLIBRI_PLACE_CORES, 0, &plan) == COLIBRI_OK && plan.n_threads >= 1,
          "default thread count");
    printf("this machine: %d threads by default, %d node(s), pinned: %d\n", plan.n_threads, plan.n_nodes, plan.pin);
    colibri_thread_plan_free(&plan);
    CHECK(colibri_placement_plan(7, 2, &plan) == COLIBRI_ERR_INVALID, "placement 7 is an error");
    size_t len = 1 << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int32_t node0 = 0, bad_node = -1;
    int rc = colibri_numa_bind(p, len, &node0, 1);
    printf("mbind to node 0: %s\n", rc == 0 ? "accepted" : "refused here (no mbind)");
    CHECK(access("/sys/devices/system/node/node0", F_OK) != 0 || rc == 0, "mbind to node 0 on a NUMA kernel");
    CHECK(colibri_numa_bind(p, len, &bad_node, 1) == -1, "a negative node is refused");
    memset(p, 1, len);
    CHECK(p[len - 1] == 1, "bound memory is usable");
    munmap(p, len);
}

/* colibri_cpu_quota on fake /proc/self/cgroup and mountinfo files whose mount points lie in
 * root/fs: v1 and v2, a parent's quota binding its child, fractions rounded up, "max" and -1
 * for none, a namespace root (the process's path not under the mount), malformed files. */
static int32_t quota_of(const char *cgroup, const char *mountinfo) {
    char pc[512], mi[512];
    fake_write("proc/cgroup", cgroup);
    fake_write("proc/mountinfo", mountinfo);
    snprintf(pc, sizeof pc, "%s/proc/cgroup", root);
    snprintf(mi, sizeof mi, "%s/proc/mountinfo", root);
    return colibri_cpu_quota(pc, mi);
}

static void test_cpu_quota(void) {
    char v1[2048], v2[2048];
    snprintf(v1, sizeof v1,
             "31 23 0:28 / %s/fs/memory rw - cgroup cgroup rw,memory\n"
             "32 23 0:29 / %s/fs/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n", root, root);
    snprintf(v2, sizeof v2, "40 23 0:30 / %s/fs/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", root);
    /* v1: the process's group allows 1.5 CPUs (150000 / 100000): 2 */
    fake_write("fs/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    fake_write("fs/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    fake_write("fs/cpu,cpuacct/pod/app/cpu.cfs_quota_us", "150000\n");
    fake_write("fs/cpu,cpuacct/pod/app/cpu.cfs_period_us", "100000\n");
    fake_write("fs/cpu,cpuacct/pod/cpu.cfs_quota_us", "-1\n");
    fake_write("fs/cpu,cpuacct/pod/cpu.cfs_period_us", "100000\n");
    CHECK(quota_of("4:memory:/pod/app\n3:cpu,cpuacct:/pod/app\n", v1) == 2, "v1 quota 1.5 CPUs is 2 threads");
    /* a parent's tighter quota binds the child */
    fake_write("fs/cpu,cpuacct/pod/cpu.cfs_quota_us", "50000\n");
    CHECK(quota_of("3:cpu,cpuacct:/pod/app\n", v1) == 1, "v1 parent's quota of half a CPU binds");
    /* no cpu controller in the process's list, or no cgroup at all: none */
    CHECK(quota_of("4:memory:/pod/app\n", v1) == 0, "v1 without the cpu controller: no quota");
    CHECK(quota_of("", v1) == 0, "empty /proc/self/cgroup: no quota");
    /* a namespace root: the process's path is not under the mount, whose own files count */
    fake_write("fs/cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
    CHECK(quota_of("3:cpu,cpuacct:/docker/abc\n", v1) == 3, "namespace root: the mount point's quota");
    /* v2: cpu.max "QUOTA PERIOD", "max PERIOD" for none, ancestors bind */
    fake_write("fs/unified/cpu.max", "max 100000\n");
    fake_write("fs/unified/a/cpu.max", "max 100000\n");
    fake_write("fs/unified/a/b/cpu.max", "400000 100000\n");
    CHECK(quota_of("0::/a/b\n", v2) == 4, "v2 cpu.max 400000 100000 is 4");
    fake_write("fs/unified/a/cpu.max", "250000 100000\n");
    CHECK(quota_of("0::/a/b\n", v2) == 3, "v2 parent's 2.5 CPUs bind: 3");
    fake_write("fs/unified/a/cpu.max", "max 100000\n");
    fake_write("fs/unified/a/b/cpu.max", "max 100000\n");
    CHECK(quota_of("0::/a/b\n", v2) == 0, "v2 max everywhere: no quota");
    /* malformed: every file hostile, none a failure */
    fake_write("fs/unified/a/b/cpu.max", "-5 100000\n");
    CHECK(quota_of("0::/a/b\n", v2) == 0, "negative quota ignored");
    fake_write("fs/unified/a/b/cpu.max", "100000 0\n");
    CHECK(quota_of("0::/a/b\n", v2) == 0, "zero period ignored");
    fake_write("fs/unified/a/b/cpu.max", "99999999999999999999 100000\n");
    CHECK(quota_of("0::/a/b\n", v2) == 0, "overflowing quota ignored");
    fake_write("fs/unified/a/b/cpu.max", "junk\n");
    CHECK(quota_of("0::/a/b\n", v2) == 0, "junk cpu.max ignored");
    CHECK(quota_of("0::/a/b\n", "garbage without fields\n- \n") == 0, "malformed mountinfo ignored");
    CHECK(quota_of("0:/a/b\nnot a line\n:::\n", v2) == 0, "malformed cgroup lines ignored");
    char missing[512];
    snprintf(missing, sizeof missing, "%s/proc/none", root);
    CHECK(colibri_cpu_quota(missing, missing) == 0, "missing /proc files: no quota");
    /* and this process's own, whatever it is, is a count or none */
    int32_t own = colibri_cpu_quota("/proc/self/cgroup", "/proc/self/mountinfo");
    printf("this process's cgroup CPU quota: %d CPUs (0: none)\n", own);
    CHECK(own >= 0, "this process's quota");
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/colibri-topology-XXXXXX");
    if (!mkdtemp(root)) {
        printf("FAIL: cannot create a temporary directory\n0 passed, 1 failed\n");
        return 1;
    }
    test_two_sockets();
    test_adjacent_siblings();
    test_hidden_and_malformed();
    test_this_machine();
    test_cpu_quota();
    fake_clear();
    rmdir(root);
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
