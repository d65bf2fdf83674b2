"""What `/proc` says about processes: start times, process groups, zombies, who listens on a port;
and ending processes found there, by process group or by the mark in their environment.

Standard library only: for a run on a remote host this file is copied there with the supervisor
and `process.py`, so the same code reads the host's `/proc`.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")
MARK = "COURSE_MARK"
"""The variable in every step command's environment that names its `process.Proc`:
`<runner pid>.<runner start time>.<random>`."""
LISTEN = "0A"
"""The state of a listening socket in /proc/net/tcp."""


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None when gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    # the command name is in parentheses and may itself hold spaces and parentheses
    return stat[stat.rfind(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When a process started, in clock ticks since boot (with the boot id, it names the process
    even after its pid is reused); None when it is gone."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields else None


def boot_id() -> str:
    """This boot of the machine (start times count from it)."""
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pids() -> list[int]:
    """Every process id in /proc."""
    return [int(name) for name in os.listdir(PROC) if name.isdigit()]


def processes() -> list[tuple[int, str, int, int]]:
    """Every process as (pid, state, parent pid, process group)."""
    found = []
    for pid in pids():
        fields = stat_fields(pid)
        if fields:
            found.append((pid, fields[0], int(fields[1]), int(fields[2])))
    return found


def environ(pid: int) -> bytes:
    """A process's environment as it was when it started, NUL-separated (b'' when unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return b"\0" + fh.read()
    except OSError:  # gone, or another user's
        return b""


def marked(
    name: str,
    value: str,
    prefix: bool = False,
    table: list[tuple[int, str, int, int]] | None = None,
    children: bool = False,
) -> list[int]:
    """Live processes whose environment sets `name` to `value` (or to a value starting with it,
    with `prefix`), and every live descendant of theirs, whatever its process group or session:
    a child that cleared its environment is still found through its parent. With `children`,
    only this process's children are read (a child subreaper's orphans come back to it)."""
    rows = [row for row in (processes() if table is None else table) if row[1] not in "ZX"]
    entry = b"\0" + f"{name}={value}".encode() + (b"" if prefix else b"\0")
    me = os.getpid()
    found = {
        pid
        for pid, _, parent, _ in rows
        if pid != me and (parent == me or not children) and entry in environ(pid) + b"\0"
    }
    below: dict[int, list[int]] = {}
    for pid, _, parent, _ in rows:
        below.setdefault(parent, []).append(pid)
    todo = list(found)
    while todo:
        for child in below.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return sorted(found)


def is_subreaper() -> bool:
    """Whether this process adopts its descendants' orphans (PR_GET_CHILD_SUBREAPER)."""
    try:
        import ctypes

        flag = ctypes.c_int(0)
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(37, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value)
    except (ImportError, OSError, AttributeError):
        return False


def group_members(pgid: int) -> list[int]:
    """Pids of the live, non-zombie processes in a process group."""
    return [pid for pid, state, _, group in processes() if group == pgid and state not in "ZX"]


def command_line(pid: int) -> str:
    """A process's command line, arguments joined by spaces ('' when unreadable)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on a port, any address, IPv4 and IPv6."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_holders(port: int) -> tuple[bool, list[tuple[int, str]]]:
    """Whether a TCP port has a listener on this machine, and the processes holding it that this
    user can see, as (pid, command line)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False, []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    holders = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = os.listdir(entry / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(entry / "fd" / fd) in wanted:
                    holders.append((int(entry.name), command_line(int(entry.name))))
                    break
            except OSError:
                continue
    return True, sorted(holders)


def port_message(port: int) -> str | None:
    """'port 8123 is in use by pid 4711: python3 server.py', or None when nothing listens on it."""
    used, holders = port_holders(port)
    if not used:
        return None
    if not holders:
        return f"port {port} is in use (by a process this user cannot see)"
    shown = "; ".join(f"pid {pid}: {cmd or '?'}" for pid, cmd in holders[:3])
    return f"port {port} is in use by {shown}"


def local_port(url: str) -> int | None:
    """The port of a readiness URL whose host is this machine (a loopback or own address, or this
    machine's name); None for a URL that points elsewhere."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if host == "localhost" or host.endswith(".localhost") or host == socket.gethostname().lower():
        return port
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None  # another machine's name: not resolved here (a lookup may hang)
    if address.is_loopback or address.is_unspecified:
        return port
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, 0))  # only an address of this machine can be bound
        except OSError:
            return None
    return port


def end_marked(mark: str, pgid: int, grace: float = 3.0) -> list[str]:
    """Once group `pgid` has ended: collect its exited processes left to us, and end the live
    processes carrying a mark (and their descendants) outside it; each as 'pid N (command)'.
    Looks again after ending them, for what they started meanwhile."""
    ended: list[str] = []
    children = is_subreaper()  # then whatever left the group has come back to us by now
    for _ in range(3):
        table = processes()
        reap_group(pgid, table)
        found = [pid for pid in marked(MARK, mark, table=table, children=children) if pid != pgid]
        if not found:
            break
        ended += [f"pid {pid} ({command_line(pid) or '?'})" for pid in found]
        kill_all(found, grace)
    return ended


def kill_all(pids: list[int], grace: float = 3.0) -> None:
    """SIGTERM these processes, SIGKILL whichever is left after grace seconds, and collect those
    that were left to us (see `become_subreaper`)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 2.0)
        while pids and time.monotonic() < deadline:
            _collect(pids)
            pids = [pid for pid in pids if _alive(pid)]
            if pids:
                time.sleep(0.02)
        if not pids:
            return


def _alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in "ZX"


def _collect(pids: list[int]) -> None:
    """Reap those of these processes that are our exited children."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def reap_group(pgid: int, table: list[tuple[int, str, int, int]] | None = None) -> None:
    """Collect the exited processes of an ended group that were left to us (see
    `become_subreaper`); the group's leader is its Popen's to collect."""
    me = os.getpid()
    for pid, state, parent, group in processes() if table is None else table:
        if group == pgid and parent == me and state == "Z" and pid != pgid:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is still there (zombies do not count)."""
    return bool(group_members(pgid))


def kill_group(pgid: int, grace: float = 3.0) -> None:
    """SIGTERM a process group, and SIGKILL whatever of it is left after grace seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
