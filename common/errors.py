"""One clean error type for bad input, and the wrapper every CLI uses to turn it into one
line on stderr and exit code 2 (never a traceback).

The wrapper also owns interruptions: SIGINT and SIGTERM both raise :class:`Interrupted` in the
main thread (Python's default SIGTERM kills without running any cleanup), so staging folders
are tidied and partial results kept; the CLI then says where they are and exits 128 + signal.
A run that cannot finish for a reason outside the input (:class:`RunFailed`: its tf.data
service went away) keeps its partial results the same way and exits :data:`EXIT_FAILED`.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import textwrap
from typing import Callable, Iterator

from absl import app, flags

from common.tflog import quiet_env

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_FAILED = 1


class InputError(Exception):
    """Bad input the user can fix: the message is one line that names the input."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class RunFailed(Exception):
    """A run that could not finish although its input was fine (e.g. its tf.data service went
    away): one line saying what happened and how far the run got. Like :class:`Interrupted`,
    ``kept`` lists where partial results were saved (:func:`common.atomic.staged` fills it)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
        self.kept: list[str] = []


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. ``kept`` lists where partial results were saved on the way out
    (filled in by :func:`common.atomic.staged` and by CLIs)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.kept: list[str] = []


_signals = {"interrupted": 0, "deferring": 0, "pending": 0}


def _on_signal(signum: int, frame) -> None:
    if _signals["interrupted"]:  # a second signal while cleaning up: leave at once
        _say(f"interrupted again by {signal.Signals(signum).name}; quitting without cleanup")
        os._exit(128 + signum)
    if _signals["deferring"]:
        _signals["pending"] = signum
        return
    _signals["interrupted"] = signum
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM (as installed by :func:`run_cli`) until the block is done, so a few
    renames that belong together are never half done; a signal that came meanwhile is raised
    at the end. (Blocking the signal mask would not do: TF's threads can receive it too.)"""
    _signals["deferring"] += 1
    try:
        yield
    finally:
        _signals["deferring"] -= 1
        signum = _signals["pending"]
        if signum and not _signals["deferring"]:
            _signals["pending"] = 0
            _signals["interrupted"] = signum
            raise Interrupted(signum)


def tf_error_line(e: BaseException) -> str:
    """The first line of a TensorFlow error's message, without TF's ``{{function_node ...}}``
    prefix and ``[Op:...]`` suffix."""
    msg = getattr(e, "message", None) or str(e) or type(e).__name__
    msg = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", msg)
    msg = re.sub(r"\s*\[Op:[^\]]*\]", "", msg)
    # tf.data prefixes the op's own message with where it ran
    msg = re.sub(r"Error in user-defined function passed to \S+ transformation with iterator: "
                 r"\S+: ", "", msg)
    noise = ("Graph execution error", "Detected at node", "File ", "Node:", "[[{{node",
             "defined at (most recent", "Executing op", "Traceback", "<stack traces unavailable>",
             "Hint:")
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
    """Run ``main(argv)``; map InputError (and OSError, MemoryError) to one line + exit 2,
    RunFailed to one line + exit 1, and SIGINT / SIGTERM to one line saying where partial
    results are + exit 128 + signal."""
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        rc = main(argv)
        return int(rc or 0)
    except InputError as e:
        _say(f"{prog}: error: {e}{_kept(e)}")
        return EXIT_BAD_INPUT
    except RunFailed as e:
        _say(f"{prog}: error: {e}{_kept(e)}")
        return EXIT_FAILED
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        where = _kept(e).removeprefix("; ") or "no results were complete, nothing was kept"
        _say(f"{prog}: interrupted by {signal.Signals(signum).name}; {where}")
        return 128 + signum
    except OSError as e:  # disk full, permission denied on the output folder, ...
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        _say(f"{prog}: error: {where}{e.strerror or e}{_kept(e)}")
        return EXIT_BAD_INPUT
    except MemoryError:
        _say(f"{prog}: error: out of memory (the input is too large for this machine)")
        return EXIT_BAD_INPUT
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _signals.update(interrupted=0, deferring=0, pending=0)


def _kept(e: BaseException) -> str:
    """What an error's line adds: where partial results were kept (``e.kept``) and what to do
    with them (``e.hint``), or ""."""
    kept = getattr(e, "kept", None)
    hint = getattr(e, "hint", "")
    return (f"; partial results kept in {', '.join(kept)}" if kept else "") + \
        (f"; {hint}" if hint else "")


#: The arguments that ask a CLI for its help (absl's own help flags, and ``-h``).
HELP_ARGS = frozenset({"--help", "-h", "-?", "--helpshort", "--helpfull", "--help=true"})
_HELP_WIDTH = 96


def cli_main(prog: str, define_flags: Callable[[], None], main: Callable[[list[str]], int | None],
             quiet_tf: bool = True, usage: str = "") -> None:
    """The whole life of one of our absl CLIs: define its flags, parse them (a bad flag is bad
    input too: one line, exit 2), run ``main`` under :func:`run_cli`, exit with its code.

    ``usage`` is the text ``--help`` prints above the flags (a usage line, then what the
    command does, for users); ``--help`` (or ``-h``) prints it and exits 0 before anything
    else runs."""
    if quiet_tf:
        quiet_env()
    before = set(flags.FLAGS)
    define_flags()
    if _asks_for_help(sys.argv[1:]):
        sys.stdout.write(help_text(usage, [n for n in flags.FLAGS if n not in before]))
        sys.exit(0)

    def parse(argv: list[str]) -> list[str]:
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            _say(f"{prog}: error: {e}")
            sys.exit(EXIT_BAD_INPUT)

    app.run(lambda argv: sys.exit(run_cli(main, argv, prog)), flags_parser=parse)


def _asks_for_help(args: list[str]) -> bool:
    """A help flag among the arguments before a ``--``."""
    for a in args:
        if a == "--":
            return False
        if a in HELP_ARGS:
            return True
    return False


def help_text(usage: str, names: list[str]) -> str:
    """``usage`` followed by the flags ``names`` (in the order given), one entry each: the
    flag, what it takes and its default, then its help, wrapped."""
    seen, lines = set(), [usage.strip("\n"), "", "flags:"]
    for name in names:
        flag = flags.FLAGS[name]
        if id(flag) in seen or flag.name != name:  # a short name of a flag already listed
            continue
        seen.add(id(flag))
        lines.append("  " + _flag_heading(flag))
        lines += textwrap.wrap(" ".join(flag.help.split()), _HELP_WIDTH, initial_indent=" " * 6,
                               subsequent_indent=" " * 6)
    lines.append("  --help")
    lines.append("      Show this help and exit.")
    return "\n".join(lines) + "\n"


def _flag_heading(flag) -> str:
    """``--steps=<integer>  (default 20; integer >= 2)``, ``--[no]verbose  (default off)``."""
    if flag.boolean:
        return f"--[no]{flag.name}  (default {'on' if flag.default else 'off'})"
    parser = flag.parser
    kind = ("|".join(parser.enum_values) if isinstance(parser, flags.EnumParser)
            else "a,b,..." if isinstance(parser, flags.ListParser)
            else {"int": "integer", "float": "number"}.get(flag.flag_type(), "text"))
    notes = [] if flag.default in (None, "", []) else [
        f"default {flag.default_as_str.strip(chr(39))}"]
    if getattr(parser, "lower_bound", None) is not None or \
            getattr(parser, "upper_bound", None) is not None:
        notes.append(parser.syntactic_help)  # "integer >= 2", "integer in the range [0, 65535]"
    return f"--{flag.name}=<{kind}>" + (f"  ({'; '.join(notes)})" if notes else "")
