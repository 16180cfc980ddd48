"""A fresh cgroup to run a process under a memory limit or a CPU quota (root; cgroup v1 or v2).

    group = MemoryCgroup.create("colibri-bench", 1536 << 20)    # CgroupUnavailable(reason) where it cannot
    subprocess.run(cmd, preexec_fn=group.join)                   # the child joins before it execs
    group.peak(), group.failcnt(), group.oom_kills()
    group.remove()

    group = CpuCgroup.create("colibri-test-cpu", 1)              # one CPU's time per period

Page cache the group's processes read in is charged to it, as their memory is; `failcnt` counts
the times its usage hit the limit (v1 memory.failcnt, v2 memory.events "max"), so 0 means the
kernel never had to enforce the limit. A CPU quota is `cpus` periods of 100 ms per 100 ms
(v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2 cpu.max).
"""
from __future__ import annotations

import os
from pathlib import Path


class CgroupUnavailable(Exception):
    """Why no cgroup of the kind asked for can be made here (one line)."""


def _mounts() -> list[tuple[str, Path, str]]:
    """(fstype, mount point, super options) of every cgroup mount."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, (fstype, _, rest) = line.split(), line.split(" - ", 1)[1].partition(" ")
        if fstype in ("cgroup", "cgroup2"):
            out.append((fstype, Path(fields[4]), rest.split(" ", 1)[-1]))
    return out


def _create(name: str, controller: str, v1_files: dict[str, str], v2_files: dict[str, str]) -> tuple[Path, int]:
    """(directory, version) of a new group `name` under the first mount of `controller`, its
    limit files written (v1_files or v2_files, name → text)."""
    if os.geteuid() != 0:
        raise CgroupUnavailable(f"not root: cannot create a {controller} cgroup")
    for fstype, mount, options in _mounts():
        if fstype == "cgroup" and controller in options.split(","):
            directory = mount / name
            directory.mkdir(exist_ok=True)
            for file, text in v1_files.items():
                (directory / file).write_text(text)
            return directory, 1
        if fstype == "cgroup2" and controller in (mount / "cgroup.controllers").read_text().split():
            try:
                (mount / "cgroup.subtree_control").write_text(f"+{controller}")
                directory = mount / name
                directory.mkdir(exist_ok=True)
                for file, text in v2_files.items():
                    (directory / file).write_text(text)
            except OSError as exc:
                raise CgroupUnavailable(f"cgroup v2 at {mount}: cannot make a {controller} child ({exc})") from None
            return directory, 2
    raise CgroupUnavailable(f"no writable {controller} cgroup controller is mounted")


class _Cgroup:
    def __init__(self, directory: Path, version: int):
        self.directory, self.version = directory, version

    def join(self) -> None:
        """Moves the calling process into the group (use as subprocess's preexec_fn)."""
        (self.directory / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        """Removes the (empty) group; its charges go to the parent."""
        self.directory.rmdir()


class CpuCgroup(_Cgroup):
    @classmethod
    def create(cls, name: str, cpus: int) -> "CpuCgroup":
        period = 100000
        return cls(*_create(name, "cpu", {"cpu.cfs_period_us": str(period), "cpu.cfs_quota_us": str(cpus * period)},
                            {"cpu.max": f"{cpus * period} {period}"}))


class MemoryCgroup(_Cgroup):
    def __init__(self, directory: Path, version: int, limit: int):
        super().__init__(directory, version)
        self.limit = limit

    @classmethod
    def create(cls, name: str, limit: int) -> "MemoryCgroup":
        return cls(*_create(name, "memory", {"memory.limit_in_bytes": str(limit)}, {"memory.max": str(limit)}), limit)

    def _read(self, name: str) -> str:
        return (self.directory / name).read_text()

    def _event(self, key: str) -> int:
        for line in self._read("memory.events" if self.version == 2 else "memory.oom_control").splitlines():
            if line.startswith(key + " "):
                return int(line.split()[1])
        return 0

    def usage(self) -> int:
        return int(self._read("memory.usage_in_bytes" if self.version == 1 else "memory.current"))

    def peak(self) -> int:
        """The group's highest memory use (its processes and the page cache charged to it)."""
        return int(self._read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"))

    def failcnt(self) -> int:
        """Times the group's usage hit its limit."""
        return int(self._read("memory.failcnt")) if self.version == 1 else self._event("max")

    def oom_kills(self) -> int:
        return self._event("oom_kill")
