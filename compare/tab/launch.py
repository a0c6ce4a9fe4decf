"""``python -m compare.tab.launch [tensorboard flags]``: TensorBoard with the Pipeline compare
tab even where this package is not installed (a source checkout on ``PYTHONPATH``: its
``tensorboard_plugins`` entry point is then unknown to Python). Installed, ``tensorboard``
itself finds the tab and this adds nothing; :mod:`compare.viewers.tensorboard` starts
TensorBoard this way so that ``compare.run --screenshot`` works from either."""
from __future__ import annotations

import sys

from absl import app
from tensorboard import default, main_lib, program
from tensorboard.plugins import base_plugin

from common.errors import HELP_ARGS
from compare.tab.plugin import PipelineCompareLoader
from compare.viewers.tensorboard import tab_installed

#: What ``--help`` prints.
USAGE = """\
usage: python -m compare.tab.launch --logdir DIR [TENSORBOARD FLAGS]

Starts TensorBoard with the Pipeline compare tab, also from a source checkout that is not
installed (where TensorBoard cannot find the tab's entry point). Installed with pip, plain
tensorboard --logdir DIR shows the tab too. It takes TensorBoard's own flags (tensorboard
--help lists them), and two of the tab's:

flags:
  --pipeline_compare_cache=<dir>
      Where the tab keeps its comparisons (default: DIR/.pipeline_compare, or
      ~/.cache/tf-pipeline-compare when DIR cannot be written).
  --pipeline_compare_timeout=<seconds>  (default 900)
      The longest one comparison may take.
"""


def main() -> None:
    if any(a in HELP_ARGS for a in sys.argv[1:]):
        sys.stdout.write(USAGE)
        sys.exit(0)
    main_lib.global_init()
    plugins = default.get_plugins()
    if not tab_installed():
        plugins.append(PipelineCompareLoader)
    tensorboard = program.TensorBoard(plugins=plugins)
    try:
        app.run(tensorboard.main, flags_parser=tensorboard.configure)
    except base_plugin.FlagsError as e:
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
