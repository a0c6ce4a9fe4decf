"""Flags more than one of our CLIs define, with their parsing (absl ``FLAGS`` are read only in
CLI modules: this is one, shared by ``compare.explain`` and ``compare.run``)."""
from __future__ import annotations

from absl import flags

from common.errors import InputError
from compare.load.budget import parse_size

FLAGS = flags.FLAGS


def define_max_memory() -> None:
    flags.DEFINE_string("max_memory", None, "Refuse before reading a trace whose load would "
                        "take more memory than this (e.g. 8G, 500M; default: the memory the "
                        "machine has available).")
    flags.DEFINE_alias("max-memory", "max_memory")


def max_memory_flag() -> int | None:
    """``--max_memory`` in bytes, None when not given; a bad size is an :class:`InputError`."""
    if FLAGS.max_memory is None:
        return None
    try:
        n = parse_size(FLAGS.max_memory)
    except ValueError as e:
        raise InputError(f"--max_memory: {e}") from None
    if n <= 0:
        raise InputError(f"--max_memory: must be more than 0, got {FLAGS.max_memory!r}")
    return n
