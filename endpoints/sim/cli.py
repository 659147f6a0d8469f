"""`python -m endpoints.sim [SGLang flags]` / `costbench sim ...`: serve the twin until SIGTERM or SIGINT.

With --port 0 it binds a free port. Either way it prints one line to stdout,
`costbench-sim listening on http://HOST:PORT`, so a launcher can read where it is.

Exit status: 0 stopped by SIGTERM or SIGINT; 1 it cannot listen (port taken, address not this host's);
2 a bad flag or a setup the twin cannot model; 70 --fault-crash-after ended it; 130 Ctrl-C before it
listened. A failure is one line on stderr, `costbench sim: error: <what>`.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from aiohttp import web

from endpoints.sim.cost.profiles import UnknownProfileError
from endpoints.sim.engine.kv_pool import KvSizingError
from endpoints.sim.http.server import create_app
from endpoints.sim.server_args import ServerArgsError, SimServerArgs, parse_server_args

READY_LINE = "The server is fired up and ready to roll!"  # SGLang's own line, printed after warm-up
PROG = "costbench sim"
EXIT_CANNOT_LISTEN = 1
EXIT_BAD_FLAGS = 2
EXIT_INTERRUPTED = 130


async def _serve(args: SimServerArgs, app: web.Application) -> None:
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        print(f"costbench-sim listening on http://{host}:{port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await asyncio.sleep(args.warmup_s)
        print(READY_LINE, flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_server_args(sys.argv[1:] if argv is None else list(argv))
        app = create_app(args)
    except (ServerArgsError, UnknownProfileError, KvSizingError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_FLAGS
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        asyncio.run(_serve(args, app))
    except OSError as exc:  # the port is taken, the host is not ours
        print(f"{PROG}: error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    except KeyboardInterrupt:  # before the signal handlers were set: it was not serving yet
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0
