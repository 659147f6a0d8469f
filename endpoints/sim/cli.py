"""`python -m endpoints.sim [SGLang flags]` / `costbench sim ...`: serve the twin until SIGTERM or SIGINT.

With --port 0 it binds a free port. Either way it prints one line to stdout,
`costbench-sim listening on http://HOST:PORT`, so a launcher can read where it is.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from aiohttp import web

from endpoints.sim.kv_pool import KvSizingError
from endpoints.sim.profiles import UnknownProfileError
from endpoints.sim.server import create_app
from endpoints.sim.server_args import ServerArgsError, SimServerArgs, parse_server_args

READY_LINE = "The server is fired up and ready to roll!"  # SGLang's own line, printed after warm-up


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
        print(f"costbench sim: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        asyncio.run(_serve(args, app))
    except OSError as exc:  # the port is taken, the host is not ours
        print(f"costbench sim: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0
