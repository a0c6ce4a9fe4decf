"""``python -m compare.tab.launch [tensorboard flags]``: TensorBoard with the Pipeline compare
tab even where this package is not installed (a source checkout on ``PYTHONPATH``: its
``tensorboard_plugins`` entry point is then unknown to Python). Installed, ``tensorboard``
itself finds the tab and this adds nothing; :mod:`compare.viewers.tensorboard` starts
TensorBoard this way so that ``compare.run --screenshot`` works from either."""
from __future__ import annotations

import sys
from importlib import metadata

from absl import app
from tensorboard import default, main_lib, program
from tensorboard.plugins import base_plugin

from compare.tab.plugin import PLUGIN_NAME, PipelineCompareLoader


def registered() -> bool:
    """Whether the installed distribution declares the tab's entry point."""
    return any(ep.name == PLUGIN_NAME
               for ep in metadata.entry_points(group="tensorboard_plugins"))


def main() -> None:
    main_lib.global_init()
    plugins = default.get_plugins()
    if not registered():
        plugins.append(PipelineCompareLoader)
    tensorboard = program.TensorBoard(plugins=plugins)
    try:
        app.run(tensorboard.main, flags_parser=tensorboard.configure)
    except base_plugin.FlagsError as e:
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
