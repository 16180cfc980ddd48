"""A fresh memory cgroup to run a process under a memory limit (root; cgroup v1 or v2).

    group = MemoryCgroup.create("colibri-bench", 1536 << 20)    # CgroupUnavailable(reason) where it cannot
    subprocess.run(cmd, preexec_fn=group.join)                   # the child joins before it execs
    group.peak(), group.failcnt(), group.oom_kills()
    group.remove()

Page cache the group's processes read in is charged to it, as their memory is; `failcnt` counts
the times its usage hit the limit (v1 memory.failcnt, v2 memory.events "max"), so 0 means the
kernel never had to enforce the limit.
"""
from __future__ import annotations

import os
from pathlib import Path


class CgroupUnavailable(Exception):
    """Why no memory cgroup can be made here (one line)."""


def _mounts() -> list[tuple[str, Path, str]]:
    """(fstype, mount point, super options) of every cgroup mount."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, (fstype, _, rest) = line.split(), line.split(" - ", 1)[1].partition(" ")
        if fstype in ("cgroup", "cgroup2"):
            out.append((fstype, Path(fields[4]), rest.split(" ", 1)[-1]))
    return out


class MemoryCgroup:
    def __init__(self, directory: Path, version: int, limit: int):
        self.directory, self.version, self.limit = directory, version, limit

    @classmethod
    def create(cls, name: str, limit: int) -> "MemoryCgroup":
        if os.geteuid() != 0:
            raise CgroupUnavailable("not root: cannot create a memory cgroup")
        for fstype, mount, options in _mounts():
            if fstype == "cgroup" and "memory" in options.split(","):
                directory = mount / name
                directory.mkdir(exist_ok=True)
                (directory / "memory.limit_in_bytes").write_text(str(limit))
                return cls(directory, 1, limit)
            if fstype == "cgroup2" and "memory" in (mount / "cgroup.controllers").read_text().split():
                try:
                    (mount / "cgroup.subtree_control").write_text("+memory")
                    directory = mount / name
                    directory.mkdir(exist_ok=True)
                    (directory / "memory.max").write_text(str(limit))
                except OSError as exc:
                    raise CgroupUnavailable(f"cgroup v2 at {mount}: cannot make a memory child ({exc})") from None
                return cls(directory, 2, limit)
        raise CgroupUnavailable("no writable memory cgroup controller is mounted")

    def join(self) -> None:
        """Moves the calling process into the group (use as subprocess's preexec_fn)."""
        (self.directory / "cgroup.procs").write_text(str(os.getpid()))

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

    def remove(self) -> None:
        """Removes the (empty) group; its charges go to the parent."""
        self.directory.rmdir()
