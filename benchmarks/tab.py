"""``python -m benchmarks.tab [--run DIR] [--views N] [--json FILE]``: how long the Pipeline
compare tab takes to show a comparison the first time (computed, then cached) and later (from
the cache), in a real TensorBoard and headless Chromium.

The pair is our default one: the legacy and modern sessions of a ``compare.run`` run folder
(``--run``; without it, ``python -m compare.run`` runs first with its defaults: 20 steps of
each pipeline on grace_hopper.jpg). Its two run folders are copied into a fresh logdir, so no
comparison is cached. TensorBoard starts over it (not timed), then:

- **first view**: the tab is opened; the comparison of the default pair is computed in the
  tab's child process (``compare.tab.compute``: ``compare_traces``) and shown;
- **later views**: the tab is opened again ``--views`` times (the page reloaded each time);
  the comparison comes from the cache.

Each view is timed two ways: ``tab_s``, from the start of the tab's own page (its frame's
``performance.timeOrigin``) to the comparison drawn, by the page's own clock, which is what the
tab controls; and ``page_s``, from asking the browser for TensorBoard's URL to the same moment,
TensorBoard's own page load included (polled every 0.1 s). ``compute_s`` is what the child
reported for its phases (report.json's ``elapsed_s``).

Side by side, just before the first view: ``cli_s``, the same pair compared by
``python -m compare.run --legacy A --modern B`` (the command-line way, all its files written),
and ``first_over_cli``, the first view's ``tab_s`` over it. Wall times on a shared machine: the
load average is printed beside them; compare the ratio across runs, not the seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from absl import flags

from common import atomic
from common.errors import InputError, cli_main, say
from compare.viewers.browser import Chromium
from compare.viewers.tensorboard import TAB_PLUGIN, TensorBoard

FLAGS = flags.FLAGS
FRAME = f"document.querySelector('iframe[src*=\"name={TAB_PLUGIN}\"]')"
DONE_JS = f"""(() => {{
  const f = {FRAME};
  const d = f && f.contentDocument;
  const r = d && d.querySelector('#pc-root');
  if (!r || !['done', 'error'].includes(r.dataset.state)) return null;
  return {{state: r.dataset.state, tab_ms: +r.dataset.doneAtMs || null,
           status: d.querySelector('#pc-status').innerText}};
}})()"""
TIMEOUT_S = 600.0

#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m benchmarks.tab [--run DIR] [--views N] [--json FILE]

How long the Pipeline compare tab takes to show our default pair (the legacy and modern
sessions of a compare.run run folder) the first time, computed, and later, from the cache, in
a real TensorBoard and headless Chromium; beside it, python -m compare.run A B on the same
pair. Without --run, python -m compare.run runs first with its defaults. Prints the times
and the load average; --json writes them (BENCHMARKS.md, "The Pipeline compare tab").
"""


def _define_flags() -> None:
    flags.DEFINE_string("run", None, "A compare.run run folder (legacy/ and modern/); default: "
                                     "run compare.run first.")
    flags.DEFINE_integer("views", 5, "Later views timed.", lower_bound=1)
    flags.DEFINE_string("json", None, "Also write the results as JSON to this file.")


def default_run(tmp: Path) -> Path:
    out = tmp / "run"
    say("benchmarks.tab: running python -m compare.run (default pair) ...")
    proc = subprocess.run([sys.executable, "-m", "compare.run", "--out", str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise InputError(f"compare.run failed: {proc.stderr.strip().splitlines()[-1:]}")
    return out


def view(page, url: str) -> dict:
    """Open TensorBoard on the tab and wait until the comparison is drawn."""
    page.navigate("about:blank")
    t0 = time.monotonic()
    page.navigate(url)
    got = page.wait_for(DONE_JS, timeout=TIMEOUT_S, interval=0.1, what="the compare tab")
    page_s = time.monotonic() - t0
    if got["state"] != "done":
        raise InputError(f"the compare tab says: {got['status']}")
    return {"page_s": round(page_s, 3), "tab_s": round(got["tab_ms"] / 1e3, 3)}


def cli(logdir: Path, work: Path) -> float:
    """``compare.run --legacy A --modern B`` on the pair's session folders: its wall time."""
    a, b = (next((logdir / side / "plugins" / "profile").iterdir()) for side in
            ("legacy", "modern"))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "compare.run", "--legacy", str(a), "--modern",
                           str(b), "--labels", "legacy,modern", "--out", str(work / "cli")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise InputError(f"compare.run failed: {proc.stderr.strip().splitlines()[-1:]}")
    return round(time.monotonic() - t0, 3)


def measure(run: Path, views: int, work: Path) -> dict:
    logdir = work / "logdir"
    for side in ("legacy", "modern"):
        if not (run / side / "plugins" / "profile").is_dir():
            raise InputError(f"{run}: no {side}/plugins/profile (not a compare.run run folder)")
        shutil.copytree(run / side, logdir / side)
    with TensorBoard(logdir, log_path=work / "tensorboard.log") as tb, \
            Chromium(width=1400, height=1000, log_path=work / "chromium.log") as browser:
        page = browser.new_page()
        url = f"{tb.url}/#{TAB_PLUGIN}"
        load = os.getloadavg()[0]
        cli_s = cli(logdir, work)
        first = view(page, url)
        later = [view(page, url) for _ in range(views)]
    elapsed = [json.loads(p.read_text()).get("elapsed_s", {})
               for p in (logdir / ".pipeline_compare").glob("*/report.json")]
    return {
        "run": str(run),
        "load_avg_1min": round(load, 2),
        "cli_s": cli_s,
        "first": first,
        "first_over_cli": round(first["tab_s"] / cli_s, 2),
        "later": later,
        "later_median": {k: round(statistics.median(v[k] for v in later), 3)
                         for k in ("page_s", "tab_s")},
        "compute_s": elapsed[0] if elapsed else None,
    }


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    with tempfile.TemporaryDirectory(prefix="bench-tab-") as tmp:
        run = Path(FLAGS.run) if FLAGS.run else default_run(Path(tmp))
        result = measure(run, FLAGS.views, Path(tmp))
    first, later = result["first"], result["later_median"]
    print(f"Pipeline compare tab over {result['run']} (load average {result['load_avg_1min']}):")
    print(f"  compare.run --legacy A --modern B on the same pair: {result['cli_s']:.2f} s")
    print(f"  first view (computed):   tab {first['tab_s']:.2f} s "
          f"({result['first_over_cli']:.2f}x compare.run), whole page {first['page_s']:.2f} s")
    print(f"  later views (cached, median of {FLAGS.views}): tab {later['tab_s']:.2f} s, "
          f"whole page {later['page_s']:.2f} s")
    print(f"  the comparison's phases in the child: {result['compute_s']}")
    if FLAGS.json:
        atomic.write_json(FLAGS.json, result)
    return 0


def main() -> None:
    cli_main("benchmarks.tab", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
