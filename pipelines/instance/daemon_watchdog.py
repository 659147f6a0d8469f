"""The dagster-daemon a costbench command starts, stopped with all it started when that command ends however it ends.

`running_daemon` (instance_runs.py) starts this module as the leader of a new session, its stdin a pipe whose write
end only the command holds, and this module starts `dagster-daemon run` as its child. The daemon, its code server,
its run workers and their step processes all stay in this process group (Dagster starts none of them in a group of
its own). When the pipe reads end-of-file, the command has exited (SIGKILL, the OOM killer, a crash: the kernel
closes its end), and this stops the whole group: SIGTERM, then SIGKILL after the grace. A SIGTERM, SIGINT or SIGHUP
to this process (the command's own teardown signals the group) does the same. So the daemon and its run workers
outlive their command by the grace and a poll at most.

The instance's daemon lock (daemon_claim.py) is passed down (`--keep-fd`): this process and the daemon hold it, so
it is free exactly when they are gone. Standard library only (and endpoints.process_group): it starts in well under
a second and cannot fail to import what the daemon imports.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time

from endpoints.process_group import group_members

POLL_S = 0.5  # how often the pipe and the daemon are looked at
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Stop(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _raise_stop(signum: int, frame: object) -> None:
    _ignore_stop_signals()  # the first one counts: the group's SIGTERM reaches this process as well
    raise _Stop(f"{signal.Signals(signum).name} arrived")


def _ignore_stop_signals() -> None:
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daemon_watchdog", description=__doc__.splitlines()[0])
    parser.add_argument("--grace-s", type=float, required=True, help="SIGTERM to SIGKILL, in seconds")
    parser.add_argument("--keep-fd", type=int, action="append", default=[], help="a descriptor the daemon inherits")
    parser.add_argument("--owner-pid", type=int, required=True, help="the command whose end stops the group")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- and the daemon's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    for s in STOP_SIGNALS:
        signal.signal(s, _raise_stop)
    try:
        try:
            daemon = subprocess.Popen(command, stdin=subprocess.DEVNULL, pass_fds=args.keep_fd)
            why = _watch(daemon, args.owner_pid)
        finally:
            _ignore_stop_signals()
    except _Stop as stop:
        why = stop.why
    _say(f"{why}: stopping process group {os.getpgrp()} (SIGTERM, SIGKILL after {args.grace_s:.0f} s)")
    return _stop_own_group(args.grace_s)


def _watch(daemon: subprocess.Popen, owner_pid: int) -> str:
    """Returns once the command that started this is gone (its end of stdin closed)."""
    told_exit = False
    while True:
        readable, _, _ = select.select([sys.stdin.fileno()], [], [], POLL_S)
        if readable and not os.read(sys.stdin.fileno(), 4096):
            return f"the command that started this daemon (pid {owner_pid}) is gone"
        if daemon.poll() is not None and not told_exit:
            # Its run workers may live on in this group: they are watched (and stopped) all the same.
            _say(f"dagster-daemon (pid {daemon.pid}) exited ({daemon.returncode}); still watching its process group")
            told_exit = True


def _stop_own_group(grace_s: float) -> int:
    group, me = os.getpgrp(), os.getpid()
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap_children()
        if group_members(group) == [me]:
            return 0
        time.sleep(0.1)
    _say(f"process group {group} still had {len(group_members(group)) - 1} process(es) after {grace_s:.0f} s: SIGKILL")
    os.killpg(group, signal.SIGKILL)  # this process with them
    return 1


def _reap_children() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass
    except ChildProcessError:
        pass


def _say(line: str) -> None:
    print(f"costbench daemon watchdog (pid {os.getpid()}): {line}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
