"""What the engine's command lines share as child processes of Blender (``engine.cli`` for a bake,
``engine.stages`` for a stage over a cache): one JSON object per line on stdout for the parent to
read, log lines on stderr, and a cancel request as a file the parent creates."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Callable


def emit(event: dict) -> None:
    """Write one event as a JSON line on stdout, flushed at once (the parent reads line by line)."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def log_to_stderr(quiet: bool) -> None:
    """Log lines on stderr: warnings only when ``quiet``, else information too."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


def cancel_flag(path: str | None) -> Callable[[], bool] | None:
    """A cancel callback that is true once the file ``path`` exists; None when no file is named."""
    if not path:
        return None

    def cancel() -> bool:
        return os.path.exists(path)

    return cancel
