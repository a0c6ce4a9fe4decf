"""Find the processes a server or browser we started left behind: by process group, or by a
marker variable in their environment (for helpers that leave the group). Linux /proc only."""
from __future__ import annotations

import os


def _state(pid: str) -> tuple[str, int] | None:
    """(state letter, process group) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # pid (comm) state ppid pgrp ...; comm may hold spaces or parentheses.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[2])


def _live_pids() -> list[str]:
    own = str(os.getpid())
    return [e.name for e in os.scandir("/proc") if e.name.isdigit() and e.name != own]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group ``pgid``."""
    found = []
    for pid in _live_pids():
        st = _state(pid)
        if st and st[1] == pgid and st[0] not in ("Z", "X"):
            found.append(int(pid))
    return found


def marked(var: str, value: str) -> list[int]:
    """Live processes whose environment holds ``var=value``."""
    needle = f"\0{var}={value}\0".encode()
    found = []
    for pid in _live_pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = b"\0" + f.read() + b"\0"
        except OSError:
            continue
        st = _state(pid)
        if needle in env and st and st[0] not in ("Z", "X"):
            found.append(int(pid))
    return found
