"""Profiling helpers shared by the runs: the TensorBoard profile, step markers, and turning an
``.xplane.pb`` into Chrome-trace JSON through xprof's own converter."""
from __future__ import annotations

import contextlib
import errno
import glob
import os
from pathlib import Path
from typing import Iterator

from common.errors import tf_error_line


@contextlib.contextmanager
def tensorboard_profile(logdir: str | os.PathLike) -> Iterator[None]:
    """Profile everything inside into ``logdir/plugins/profile/<timestamp>/<host>.xplane.pb``."""
    import tensorflow as tf  # lazy: TensorFlow takes seconds to import

    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=2, python_tracer_level=0,
                                                       device_tracer_level=1)
    tf.profiler.experimental.start(str(logdir), options=options)
    try:
        yield
    finally:
        try:
            tf.profiler.experimental.stop()
        except tf.errors.OpError as e:
            raise _write_error(e, logdir) from None


def _write_error(e, logdir) -> OSError:
    """The profiler's failure to write its .xplane.pb (disk full, file too large) as the
    OSError it is: TF reports it as an OpError whose message is ``<path>; <strerror>``."""
    msg = tf_error_line(e)
    path, _, why = msg.rpartition("; ")
    codes = {os.strerror(c): c for c in (errno.ENOSPC, errno.EFBIG, errno.EACCES, errno.EROFS,
                                         errno.EDQUOT)}
    return OSError(codes.get(why, errno.EIO), why or msg, path or str(logdir))


def step(name: str, num: int):
    """The step marker TensorBoard's overview and input-pipeline pages need (``_r=1``)."""
    import tensorflow as tf  # lazy: TensorFlow takes seconds to import

    return tf.profiler.experimental.Trace(name, step_num=num, _r=1)


def xplane_files(logdir: str | os.PathLike) -> list[str]:
    """Every ``*.xplane.pb`` under ``logdir`` (a run folder or a profile session folder)."""
    return sorted(glob.glob(os.path.join(str(logdir), "**", "*.xplane.pb"), recursive=True))


def xplane_to_trace_json(paths: list[str]) -> str:
    """The Chrome trace (JSON text) that TensorBoard's trace viewer shows for these xplanes."""
    from xprof.convert import raw_to_tool_data  # lazy: loads xprof's native library

    data, _ = raw_to_tool_data.xspace_to_tool_data(list(paths), "trace_viewer", {})
    if not data:
        raise ValueError(f"xprof produced no trace for {', '.join(paths)}")
    return data if isinstance(data, str) else data.decode("utf-8")


def session_dir(logdir: str | os.PathLike) -> Path | None:
    """The newest ``plugins/profile/<session>`` folder under ``logdir``."""
    sessions = sorted(Path(logdir).glob("plugins/profile/*"))
    return sessions[-1] if sessions else None
