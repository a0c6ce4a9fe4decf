"""``python -m benchmarks.migrate_scan [--sizes 250,500,1000,5000] [--repeat N]``: seconds
``compare.migrate`` takes on generated scripts of growing size, to show that the analysis grows
linearly with the script. ``--real NAME[,NAME]`` instead times concatenated copies of real
pipeline modules from ``tests/fixtures/real_scripts`` (issue 30's scale target: 1 MB in 10 s,
5 MB in 30 s on a loaded 2-core machine), and says whether the plans of the copies are the
plans of one copy.

Three kinds of generated script, each made to the requested size in KB:

- ``pipelines``: a TF1 input pipeline (producer, reader, decode, augmentation, shuffle_batch,
  session loop, FULL_TRACE) repeated under new names, so every copy is a pipeline to plan;
- ``long_string``: one call whose argument is a single string literal of the whole size;
- ``small_functions``: many three-line functions that each make a random draw (about 30,000 of
  them at 1.9 MB).

For each it prints the size, the wall and CPU seconds of :func:`compare.migrate.analyze_source`
(parse, scan, pipeline plans, report text) and CPU seconds per MB; per-MB times that stay flat as
the size grows are linear growth. CPU time is the steadier measure on a shared machine. Timing
targets live here, not in the unit tests.
"""
from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from compare.migrate import analyze_source

HEADER = "import tensorflow as tf\n\n"

PIPELINE = '''
def read_{i}(queue):
    reader = tf.WholeFileReader()
    key, value = reader.read(queue)
    image = tf.image.decode_jpeg(value, channels=3)
    image = tf.image.resize_images(image, [256, 256])
    image = tf.random_crop(image, [224, 224, 3])
    image = tf.image.random_flip_left_right(image)
    return image, key


def inputs_{i}(files, batch_size):
    queue = tf.train.string_input_producer(files, num_epochs=None, shuffle=True)
    image, key = read_{i}(queue)
    images, keys = tf.train.shuffle_batch([image, key], batch_size=batch_size, num_threads=4,
                                          capacity=1000 + 3 * batch_size, min_after_dequeue=1000)
    return images, keys


def train_{i}():
    images, keys = inputs_{i}(["a_{i}.jpg", "b_{i}.jpg"], 32)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        sess.run(images, options=options, run_metadata=tf.RunMetadata())
        coord.request_stop()
        coord.join(threads)
'''

SMALL = "def f_{i}(x):\n    y = tf.random_uniform([2], seed={i})\n    return x + y\n"


def _repeated(template: str, size: int) -> str:
    """HEADER then ``template`` numbered 0, 1, ... until ``size`` bytes or more."""
    parts, total, i = [HEADER], len(HEADER), 0
    while total < size:
        part = template.format(i=i)
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)


def pipelines(size: int) -> str:
    return _repeated(PIPELINE, size)


def long_string(size: int) -> str:
    body = "x" * max(0, size - 80)
    return HEADER + f"q = tf.train.string_input_producer(['{body}'])\n"


def small_functions(size: int) -> str:
    return _repeated(SMALL, size)


KINDS = {"pipelines": pipelines, "long_string": long_string, "small_functions": small_functions}
REAL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real_scripts"
#: The real modules timed by default: the slowest per MB among the fixtures, of each shape
#: (methods and feeder threads, readers in methods, module-level pipelines, Python 2).
DEFAULT_REAL = ("wavenet_audio_reader.py", "nsynth_reader.py", "cyclegan_reader.py",
                "kwaugh_multithread_generator.py", "contextual_lstm_input_pipeline.py",
                "py2_tfrecord_test5.py")


def concatenated(text: str, size: int) -> str:
    """Copies of ``text`` one after another, up to ``size`` bytes or more."""
    text = text if text.endswith("\n") else text + "\n"
    return text * (size // len(text) + 1)


def same_plans(text: str, copies: str) -> bool:
    """Are the plans of ``copies`` (concatenated ``text``) those of one copy, each copy's with
    its lines moved down by the copies before it?"""
    one = [_plan_text(p) for p in analyze_source(text, "bench.py").pipelines]
    step = text.count("\n") + (not text.endswith("\n"))
    for p in analyze_source(copies, "bench.py").pipelines:
        k = (p.line - 1) // step
        if _shift(_plan_text(p), -k * step) not in one:
            return False
    return True


def _plan_text(p) -> str:
    return "\n".join([p.function, str(p.line), p.chain, *p.legend, *p.notes,
                      *(f"{u.line}: {u.what}: {u.why}" for u in p.unresolved)])


def _shift(text: str, by: int) -> str:
    """Every line number a plan writes (``line 12``, ``lines 3-5``, ``lines 3, 9``, the
    pipeline's own line) moved by ``by``."""
    def move(m: re.Match) -> str:
        return re.sub(r"\d+", lambda n: str(int(n.group()) + by), m.group())
    text = re.sub(r"\blines? \d+(?:(?:-|, )\d+)*", move, text)
    head, _, rest = text.partition("\n")
    line, _, rest = rest.partition("\n")
    unresolved = re.sub(r"^(\d+):", lambda n: f"{int(n.group(1)) + by}:", rest, flags=re.M)
    return "\n".join([head, str(int(line) + by), unresolved])


def seconds(text: str, repeat: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of the whole report (analysis and text) for ``text``."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        analyze_source(text, "bench.py").to_text()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.migrate_scan", description=(
        "Seconds compare.migrate takes on generated TF1 scripts of growing size, to show "
        "that the analysis grows linearly with the script."))
    parser.add_argument("--sizes", default="250,500,1000,5000",
                        help="script sizes in KB, comma-separated")
    parser.add_argument("--kinds", default=",".join(KINDS), help="which kinds of script")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size (median)")
    parser.add_argument("--real", default=None, help="time concatenated copies of these real "
                        "scripts (names in tests/fixtures/real_scripts, comma-separated; "
                        "'default': " + ",".join(DEFAULT_REAL) + ") instead")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.real:
        names = DEFAULT_REAL if args.real == "default" else args.real.split(",")
        return _real(names, sizes, args.repeat)
    print(f"{'kind':<16} {'size KB':>8} {'wall s':>7} {'CPU s':>7} {'CPU s/MB':>9}")
    for kind in args.kinds.split(","):
        make = KINDS[kind]
        for kb in sizes:
            text = make(kb * 1000)
            wall, cpu = seconds(text, args.repeat)
            print(f"{kind:<16} {len(text) / 1000:>8.0f} {wall:>7.2f} {cpu:>7.2f} "
                  f"{cpu / (len(text) / 1e6):>9.2f}", flush=True)
    return 0


def _real(names: list[str], sizes: list[int], repeat: int) -> int:
    """Concatenated copies of each real script: seconds per size, and whether the plans of
    the largest are those of one copy."""
    print(f"{'script':<36} {'size KB':>8} {'wall s':>7} {'CPU s':>7} {'CPU s/MB':>9} "
          f"{'plans':>6}")
    for name in names:
        if not name.endswith(".py"):
            raise SystemExit(f"--real {name}: a Python script is needed (copies of a notebook's "
                             "JSON are no script)")
        text = (REAL / name).read_text(encoding="utf-8")
        for kb in sizes:
            copies = concatenated(text, kb * 1000)
            wall, cpu = seconds(copies, repeat)
            same = "same" if kb == max(sizes) and same_plans(text, copies) else (
                "-" if kb != max(sizes) else "DIFFER")
            print(f"{name:<36} {len(copies) / 1000:>8.0f} {wall:>7.2f} {cpu:>7.2f} "
                  f"{cpu / (len(copies) / 1e6):>9.2f} {same:>6}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
