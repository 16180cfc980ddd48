/*
 * cpu_quota.c — the CPU time a cgroup lets this process use (topology.h):
 * a container started with `docker run --cpus=2` or a Kubernetes CPU limit
 * keeps every host CPU in the affinity mask and caps the time instead
 * (CFS quota). A pool of one thread per physical core there spins and
 * splits its work over far more threads than can run, and the kernel
 * throttles the whole group each period; the default thread count takes
 * the quota into account.
 *
 * Read as the memory budget's limits are (colibri/paging.py): the
 * process's cgroup from /proc/self/cgroup (v2 "0::PATH", v1 the hierarchy
 * whose controllers include "cpu"), the controller's mount points from
 * /proc/self/mountinfo, then every directory from the process's own up to
 * the mount point (a parent's quota binds its children; a path that is not
 * there, a namespace root, leaves the mount point itself). Every file is
 * hostile: lines are bounded, numbers checked, anything malformed ignored.
 */
#define _GNU_SOURCE 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "topology.h"

#define COLIBRI_QUOTA_LINE 4096          /* longest line read from the /proc files */
#define COLIBRI_QUOTA_MAX_US 1000000000000LL   /* quota and period bounds: 11.6 days */

/* Whether the comma-separated list has exactly the entry `name`. */
static int colibri_list_has(const char *list, size_t len, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i <= len;) {
        size_t end = i;
        while (end < len && list[end] != ',') end++;
        if (end - i == n && memcmp(list + i, name, n) == 0) return 1;
        i = end + 1;
    }
    return 0;
}

/* The first integer of the file at path into *v (an optional '-', digits; "max" → -1). 0 on
 * success, -1 if the file is missing or does not start with one. */
static int colibri_read_number(const char *path, long long *v) {
    char text[64];
    if (colibri_text_read(path, text, sizeof text) < 0) return -1;
    if (strncmp(text, "max", 3) == 0) {
        *v = -1;
        return 0;
    }
    char *end;
    long long x = strtoll(text, &end, 10);
    if (end == text || x < -1 || x > COLIBRI_QUOTA_MAX_US) return -1;
    *v = x;
    return 0;
}

/* The CPUs one cgroup directory's quota allows (v2: cpu.max "QUOTA PERIOD"; v1:
 * cpu.cfs_quota_us and cpu.cfs_period_us), rounded up; 0 for none. */
static int32_t colibri_dir_quota(const char *dir, int v2) {
    char path[COLIBRI_QUOTA_LINE + 32];
    long long quota = -1, period = 0;
    if (v2) {
        char text[64];
        if (snprintf(path, sizeof path, "%s/cpu.max", dir) >= (int)sizeof path) return 0;
        if (colibri_text_read(path, text, sizeof text) < 0) return 0;
        if (strncmp(text, "max", 3) == 0) return 0;
        char *end, *end2;
        quota = strtoll(text, &end, 10);
        period = end != text && *end == ' ' ? strtoll(end + 1, &end2, 10) : 0;
    } else {
        if (snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= (int)sizeof path) return 0;
        if (colibri_read_number(path, &quota) != 0) return 0;
        if (snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= (int)sizeof path) return 0;
        if (colibri_read_number(path, &period) != 0) return 0;
    }
    if (quota <= 0 || period <= 0 || quota > COLIBRI_QUOTA_MAX_US || period > COLIBRI_QUOTA_MAX_US) return 0;
    long long cpus = (quota + period - 1) / period;
    return cpus > COLIBRI_QUOTA_CPUS_MAX ? COLIBRI_QUOTA_CPUS_MAX : (int32_t)cpus;
}

static int colibri_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The tightest quota (0: none) over the directories `mount` + each prefix of the cgroup path
 * `rel` that exist, the deepest first and the mount point last. */
static int32_t colibri_mount_quota(const char *mount, const char *rel, int v2) {
    char dir[2 * COLIBRI_QUOTA_LINE];
    int32_t best = 0;
    size_t rel_len = strlen(rel);
    while (rel_len > 0 && rel[rel_len - 1] == '/') rel_len--;
    for (;;) {   /* rel[0, rel_len): the deepest prefix not yet looked at */
        if (snprintf(dir, sizeof dir, "%s%.*s", mount, (int)rel_len, rel) < (int)sizeof dir && colibri_is_dir(dir)) {
            int32_t q = colibri_dir_quota(dir, v2);
            if (q > 0 && (best == 0 || q < best)) best = q;
        }
        if (rel_len == 0) break;
        while (rel_len > 0 && rel[rel_len - 1] != '/') rel_len--;   /* drop the last component */
        while (rel_len > 0 && rel[rel_len - 1] == '/') rel_len--;
    }
    return best;
}

int32_t colibri_cpu_quota(const char *proc_cgroup, const char *mountinfo) {
    char line[COLIBRI_QUOTA_LINE], v2_path[COLIBRI_QUOTA_LINE] = "", v1_path[COLIBRI_QUOTA_LINE] = "";
    int has_v2 = 0, has_v1 = 0;
    FILE *f = fopen(proc_cgroup, "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {   /* "ID:CONTROLLERS:PATH" */
        if (!strchr(line, '\n') && !feof(f)) break;   /* a line longer than the buffer: stop reading */
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/') continue;
        if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1) {
            snprintf(v2_path, sizeof v2_path, "%s", c2 + 1);
            has_v2 = 1;
        } else if (colibri_list_has(c1 + 1, (size_t)(c2 - c1 - 1), "cpu")) {
            snprintf(v1_path, sizeof v1_path, "%s", c2 + 1);
            has_v1 = 1;
        }
    }
    fclose(f);
    if (!has_v2 && !has_v1) return 0;
    f = fopen(mountinfo, "r");
    if (!f) return 0;
    int32_t best = 0;
    while (fgets(line, sizeof line, f)) {   /* "ID PARENT MAJ:MIN ROOT MOUNT OPTIONS ... - FSTYPE SOURCE SUPER" */
        if (!strchr(line, '\n') && !feof(f)) break;   /* a line longer than the buffer: stop reading */
        line[strcspn(line, "\n")] = '\0';
        char *dash = strstr(line, " - ");
        if (!dash) continue;
        *dash = '\0';
        char *field[5] = {NULL}, *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; i < 5 && tok; i++, tok = strtok_r(NULL, " ", &save)) field[i] = tok;
        char *fstype = strtok_r(dash + 3, " ", &save), *source = strtok_r(NULL, " ", &save);
        char *super = strtok_r(NULL, " ", &save);
        if (!field[4] || !fstype || !source) continue;
        int32_t q = 0;
        if (strcmp(fstype, "cgroup2") == 0 && has_v2) {
            q = colibri_mount_quota(field[4], v2_path, 1);
        } else if (strcmp(fstype, "cgroup") == 0 && has_v1 && super && colibri_list_has(super, strlen(super), "cpu")) {
            q = colibri_mount_quota(field[4], v1_path, 0);
        }
        if (q > 0 && (best == 0 || q < best)) best = q;
    }
    fclose(f);
    return best;
}
