"""Running a coroutine to completion from synchronous code, with or without a running loop.

`asyncio.run` refuses to start inside a running event loop, which is where a notebook cell
(Jupyter, IPython's autoawait) or an async application calls privrec from. `run_blocking` then
runs the coroutine on a loop of its own in a worker thread and waits for it, so a synchronous
entry point (`privrec.simulate`) works from a plain script and from a running loop alike; the
awaitable variants (`privrec.simulate_async`) run the same synchronous call in a thread, so
the caller's loop stays responsive meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_running() -> bool:
    """Whether an asyncio event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(main())``; inside a running event loop, the same on a new loop in a
    worker thread (this thread waits for it). `main` makes the coroutine, so none is created
    in a thread that does not run it."""
    if not loop_running():
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="privrec-run") as pool:
        return pool.submit(lambda: asyncio.run(main())).result()


__all__ = ["loop_running", "run_blocking"]
