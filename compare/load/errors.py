"""The loaders' error and the formats they read."""
from __future__ import annotations

from common.errors import InputError

FORMATS_WE_READ = ("timeline.py JSON, Chrome trace JSON (.json / .json.gz, e.g. xprof's "
                   "trace_viewer output), .xplane.pb, or a TensorBoard logdir")


class LoadError(InputError):
    """A trace that cannot be read; the message names the file and what we read."""
