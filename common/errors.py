"""One clean error type for bad input, and the wrapper every CLI uses to turn it into one
line on stderr and exit code 2 (never a traceback)."""
from __future__ import annotations

import os
import sys
from typing import Callable

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class InputError(Exception):
    """Bad input the user can fix: the message is one line that names the input."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def tf_error_line(e: BaseException) -> str:
    """The first line of a TensorFlow error's message, without TF's ``{{function_node ...}}``
    prefix and ``[Op:...]`` suffix."""
    import re

    msg = getattr(e, "message", None) or str(e) or type(e).__name__
    msg = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", msg)
    msg = re.sub(r"\s*\[Op:[^\]]*\]", "", msg)
    noise = ("Graph execution error", "Detected at node", "File ", "Node:", "[[{{node",
             "defined at (most recent", "Executing op", "Traceback")
    lines = [ln.strip() for ln in msg.strip().splitlines()
             if ln.strip() and not ln.strip().startswith(noise)]
    return lines[0] if lines else type(e).__name__


def _say(line: str) -> None:
    # Write to the real stderr even when TF's native logs were redirected away from fd 2.
    fd = getattr(sys, "_real_stderr_fd", None)
    data = (line.rstrip("\n") + "\n").encode("utf-8", "replace")
    if fd is not None:
        os.write(fd, data)
    else:
        sys.stderr.write(line.rstrip("\n") + "\n")
        sys.stderr.flush()


def say(line: str) -> None:
    """Print a progress or error line for the user (to the real stderr)."""
    _say(line)


def run_cli(main: Callable[[list[str]], int | None], argv: list[str], prog: str) -> int:
    """Run ``main(argv)``; map InputError to one line + exit 2 and Ctrl-C to exit 130."""
    try:
        rc = main(argv)
        return int(rc or 0)
    except InputError as e:
        _say(f"{prog}: error: {e}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _say(f"{prog}: interrupted")
        return EXIT_INTERRUPTED
    except OSError as e:  # disk full, permission denied on the output folder, ...
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        _say(f"{prog}: error: {e.strerror or e}{where}")
        return EXIT_BAD_INPUT


def cli_main(prog: str, define_flags: Callable[[], None], main: Callable[[list[str]], int | None],
             quiet_tf: bool = True) -> None:
    """The whole life of one of our absl CLIs: define its flags, parse them (a bad flag is bad
    input too: one line, exit 2), run ``main`` under :func:`run_cli`, exit with its code."""
    from absl import app, flags

    if quiet_tf:
        from common.tflog import quiet_env

        quiet_env()
    define_flags()

    def parse(argv: list[str]) -> list[str]:
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            _say(f"{prog}: error: {e}")
            sys.exit(EXIT_BAD_INPUT)

    app.run(lambda argv: sys.exit(run_cli(main, argv, prog)), flags_parser=parse)
