"""``compare.migrate``: finds every legacy construct by qualified name, at the right line, and
nothing else; explains what to use instead; one-line errors for bad input. No TensorFlow needed."""
from __future__ import annotations

import ast
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import InputError
from compare.migrate import analyze_file, analyze_source
from compare.migration.rules import CATEGORIES, PITFALLS, RULES_BY_ID
from tests.conftest import assert_one_line_error, run_module

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SEED = FIXTURES / "seed_pipeline.py"
COMPAT = FIXTURES / "tf1_compat_pipeline.py"


def lines_with(path: Path, needle: str) -> list[int]:
    """1-based numbers of the lines of ``path`` that contain ``needle``."""
    return [i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln]


def line_with(path: Path, needle: str) -> int:
    found = lines_with(path, needle)
    assert len(found) == 1, (needle, found)
    return found[0]


def found(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule.id) for f in analyze_source(source, "t.py").findings]


# -- the seed script --------------------------------------------------------------------------

SEED_EXPECTED = [  # (text on the line, rule) -- lines are looked up in the fixture itself
    ("tf.image.random_brightness(", "image.random_brightness"),
    ("tf.image.random_saturation(", "image.random_saturation"),
    ("tf.image.random_contrast(", "image.random_contrast"),
    ("cropped = tf.random_crop(", "random_crop"),
    ("cropimg = tf.random_crop(", "random_crop"),
    ("tf.random_shuffle(out)", "random_shuffle"),
    ("jit_scope = tf.contrib.compiler.jit.experimental_jit_scope", "jit_scope"),
    ("with jit_scope():", "jit_scope"),
    ("tf.WholeFileReader()", "whole_file_reader"),
    ("reader.read(input_queue)", "reader.read"),
    ("tf.train.string_input_producer(", "string_input_producer"),
    ("tf.global_variables_initializer()", "variables_initializer"),
    ("tf.ConfigProto()", "config_proto"),
    ("global_jit_level = tf.OptimizerOptions.ON_1", "global_jit_level"),
    ("with tf.Session(config=config) as sess:", "session"),
    ("tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)", "run_options"),
    ("tf.RunMetadata()", "run_metadata"),
    ("tf.train.Coordinator()", "coordinator"),
    ("tf.train.start_queue_runners(", "start_queue_runners"),
    ("options=run_options, run_metadata=run_metadata", "traced_run"),
    ("coord.request_stop()", "coordinator.method"),
    ("coord.join(threads)", "coordinator.method"),
    ("timeline.Timeline(run_metadata.step_stats)", "timeline"),
    ("tl.generate_chrome_trace_format()", "timeline.method"),
]


@pytest.fixture(scope="module")
def seed_report():
    return analyze_file(SEED)


def test_seed_every_construct_found_at_its_line_and_nothing_else(seed_report):
    expected = collections.Counter((ln, rule) for needle, rule in SEED_EXPECTED
                                   for ln in lines_with(SEED, needle))
    assert all(lines_with(SEED, n) for n, _ in SEED_EXPECTED)
    assert len(lines_with(SEED, "jit_scope = tf.contrib")) == 3
    assert len(lines_with(SEED, "with jit_scope():")) == 3
    got = collections.Counter((f.line, f.rule.id) for f in seed_report.findings)
    assert got == expected


def test_seed_columns_point_at_the_construct(seed_report):
    text = SEED.read_text().splitlines()
    for f in seed_report.findings:
        at = text[f.line - 1][f.col - 1:]
        head = f.via or ("config" if f.rule.id == "global_jit_level" else
                         f.construct.split("(")[0].split(" ")[0])
        assert at.startswith(head), (f.line, f.col, f.construct, at)


def test_seed_aliased_jit_scope_uses_resolve_through_the_variable(seed_report):
    uses = [f for f in seed_report.findings if f.via]
    assert [f.line for f in uses] == lines_with(SEED, "with jit_scope():")
    for f in uses:
        assert f.via == "jit_scope"
        assert f.construct == "tf.contrib.compiler.jit.experimental_jit_scope"
        assert f.qualified_name == "tensorflow.contrib.compiler.jit.experimental_jit_scope"
        assert f.rule.category == "xla_jit"
        assert f.upgrade == "unchanged"  # tf_upgrade_v2 only sees the name jit_scope there


def test_seed_full_trace_is_one_finding_with_its_level(seed_report):
    line = line_with(SEED, "FULL_TRACE")
    on_line = [f for f in seed_report.findings if f.line == line]
    assert len(on_line) == 1
    assert on_line[0].construct == "tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)"
    assert on_line[0].arguments == {"trace_level": "tf.RunOptions.FULL_TRACE"}


def test_seed_plan_is_one_pipeline_with_per_example_augmentation(seed_report):
    (p,) = seed_report.pipelines
    assert p.function == "<module>" and p.kind == "reader"
    assert p.line == line_with(SEED, "reader.read(input_queue)")
    (v,) = p.variants
    assert v.source.kind == "files" and v.source.data.text == '["Lena.jpg"]'
    assert [st.kind for st in v.stages] == ["read", "map"]
    assert v.stages[0].reader == "whole_file"
    chain = p.chain
    ast.parse(chain)
    assert chain.startswith('ds = tf.data.Dataset.from_tensor_slices(["Lena.jpg"])\n')
    assert "ds = ds.repeat()" in chain and "ds.map(tf.io.read_file" in chain
    assert ".shuffle(" not in chain  # one file: nothing to shuffle
    assert "ds = ds.batch(" not in chain  # the seed does not batch
    draws = v.maps()[0].random
    assert sorted(d.line for d in draws) == sorted(
        lines_with(SEED, "tf.image.random_") + lines_with(SEED, "tf.random_crop(")
        + lines_with(SEED, "tf.random_shuffle("))
    assert all(d.seed is None and not d.shares_seed_with for d in draws)
    assert {d.stateless for d in draws} >= {"tf.image.stateless_random_crop",
                                             "tf.random.experimental.stateless_shuffle"}
    steps = {s.function for s in v.maps()[0].steps}
    assert {"readimage", "resize_image", "augmentbody", "coloraugment"} <= steps
    plan = seed_report.plan
    for needle in ("@tf.function(jit_compile=True)", "7.2 s/image",
                   "tf.profiler.experimental.start",
                   'Trace("step", step_num=i, _r=1)', "TensorBoard's Profile tab",
                   "tf.train.start_queue_runners"):
        assert needle in plan, needle


def test_seed_upgrade_note_matches_tf_upgrade_v2(seed_report):
    """Counts as tf_upgrade_v2 2.21 reported them on the seed: 3 tf.contrib errors,
    tf.random_crop/random_shuffle renamed to TF2 names, the rest to tf.compat.v1 or untouched."""
    note = seed_report.tf_upgrade_v2
    assert "mark 3 tf.contrib uses ERROR" in note
    assert "rename 3 to TF2 names" in note and "tf.random_crop, tf.random_shuffle" in note
    assert "rename 9 to tf.compat.v1" in note
    assert "never builds a tf.data pipeline" in note


def test_seed_text_report_sections(seed_report):
    text = seed_report.to_text()
    head = text.split("\n\n")[0]
    for cat, n in seed_report.to_json()["summary"]["by_category"].items():
        assert f"{cat} {n}" in head
    assert text.index("What tf_upgrade_v2 would do") < text.index("Migration plan") < text.index(
        "Pipeline 1 of 1") < text.index("[queue_input, 1]")
    positions = [text.index(f"[{c},") for c in CATEGORIES if f"[{c}," in text]
    assert positions == sorted(positions) and len(positions) == 7  # no batching in the seed
    section = text[text.index("[stateful_random,"):text.index("[xla_jit,")]
    listed = [int(m.group(1)) for m in re.finditer(r"^  (\d+):\d+ ", section, re.M)]
    assert listed == sorted(listed) and len(listed) == 6
    assert PITFALLS["stateful_seeds"][:40] in " ".join(section.split())
    assert "stateless_split" in section
    # our own files are named once, at the end, not under every category
    assert text.count("modern/augment.py") == 1 and text.rstrip().split("\n")[-3].startswith(
        "See also:")


# -- a tf.compat.v1 script: aliases and look-alikes ------------------------------------------

def _expectations(path: Path) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for i, ln in enumerate(path.read_text().splitlines(), 1):
        m = re.search(r"# expect: (.+)$", ln)
        if m:
            for rule in m.group(1).split(","):
                out[(i, rule.strip())] += 1
    return out


def test_compat_fixture_finds_exactly_the_annotated_lines():
    expected = _expectations(COMPAT)
    assert sum(expected.values()) > 25 and all(r in RULES_BY_ID for _, r in expected)
    got = collections.Counter((f.line, f.rule.id) for f in analyze_file(COMPAT).findings)
    assert got == expected, (got - expected, expected - got)


def test_compat_fixture_plans_each_pipeline_function():
    report = analyze_file(COMPAT)
    by_fn = {p.function: p for p in report.pipelines}
    assert set(by_fn) == {"input_pipeline", "sliced", "custom_queue"}
    p = by_fn["input_pipeline"]
    assert p.line == line_with(COMPAT, "return sbatch(")
    (v,) = p.variants
    assert v.source.kind == "file_pattern" and v.source.data.text == "pattern"
    assert v.source.num_epochs.value == 10
    batch = v.batch()
    assert batch.op == "shuffle_batch" and batch.arg("min_after_dequeue").value == 1000
    assert v.maps()[0].parallel.value == 4
    assert "ds = ds.flat_map(tf.data.TFRecordDataset)" in p.chain
    assert "ds = ds.shuffle(1000)\nds = ds.batch(batch_size, drop_remainder=True)" in p.chain
    assert by_fn["sliced"].variants[0].source.kind == "rows"
    assert ".shuffle(" not in by_fn["sliced"].chain  # shuffle=False
    q = by_fn["custom_queue"].variants[0].source
    assert q.kind == "rows" and q.repeat  # a queue runner re-runs the enqueue_many
    assert "on each batch" not in report.plan


def test_compat_fixture_aliases_name_the_construct_as_written():
    by_line = {f.line: f for f in analyze_file(COMPAT).findings}
    f = by_line[line_with(COMPAT, "return sbatch(")]
    assert (f.construct, f.qualified_name) == ("sbatch", "tensorflow.train.shuffle_batch")
    assert f.arguments["batch_size"] == "batch_size" and f.arguments["min_after_dequeue"] == "1000"
    f = by_line[line_with(COMPAT, "with compile_scope(")]
    assert (f.construct, f.via) == ("jit.experimental_jit_scope", "compile_scope")
    f = by_line[line_with(COMPAT, "v1train.string_input_producer(")]
    assert f.qualified_name == "tensorflow.train.string_input_producer"
    assert f.upgrade == "already_compat_v1"


@pytest.mark.parametrize("source", [
    "import tensorflow as tf\ntf.train.batch(x, 4)",
    "import tensorflow.compat.v1 as tf\ntf.train.batch(x, 4)",
    "import tensorflow\ntensorflow.compat.v1.train.batch(x, 4)",
    "import tensorflow.compat.v1\ntensorflow.compat.v1.train.batch(x, 4)",
    "from tensorflow.compat import v1\nv1.train.batch(x, 4)",
    "from tensorflow.python.training import input as tf_input\ntf_input.batch(x, 4)",
    "from tensorflow.compat.v1.train import batch as b\nb(x, 4)",
    "from tensorflow.compat.v1.train import *\nbatch(x, 4)",
    "import tensorflow as tf\nT = tf.train\nT.batch(x, 4)",
    "import tensorflow as tf\ndef f():\n    return tf.train.batch(x, 4)",
    "import tensorflow as tf\nclass C:\n    def m(self):\n        return tf.train.batch(x, 4)",
    "import tensorflow as tf\ng = lambda: tf.train.batch(x, 4)",
    "import tensorflow as tf\nys = [tf.train.batch(x, 4) for x in xs]",
])
def test_aliases_resolve_to_the_qualified_name(source):
    assert [r for _, r in found(source)] == ["batch"]
    assert found(source)[0][0] == source.count("\n") + 1


@pytest.mark.parametrize("source", [
    "def batch(a, n):\n    return a\nbatch([1], 4)",                     # user function
    "from tensorflow.compat.v1.train import *\ndef batch(a):\n    return a\nbatch(x)",
    "import tensorflow as tf\ndef f(tf):\n    return tf.train.batch(x, 4)",  # parameter shadows
    "import mytf as tf\ntf.sqrt(x)",  # not tensorflow, nor TF1 pipeline calls (test_migrate_flow)
    "import numpy as np\nnp.random.uniform(size=3)",
    "import tensorflow as tf\nds = tf.data.Dataset.range(4).shuffle(4).batch(2)",
    "import tensorflow as tf\ntf.random.stateless_uniform([2], seed=[1, 2])",
    "reader = open('f')\nreader.read()",
    "def f(reader, q):\n    return reader.read(q)",
    "coord = object()\ncoord.join()",
    "x = 'tf.train.shuffle_batch(x)'  # tf.train.batch in a comment",
    "import tensorflow as tf\nfor tf in range(3):\n    tf.train.batch(x, 4)",
])
def test_look_alikes_do_not_match(source):
    assert found(source) == []


def test_objects_flow_through_assignments_and_with():
    src = ("import tensorflow as tf\n"
           "r = tf.TFRecordReader()\n"          # 2
           "r2 = r\n"
           "k, v = r2.read(q)\n"                # 4: bound via r2 = r
           "with tf.Session() as s:\n"          # 5
           "    s.run(x, options=o)\n"          # 6: a traced run only with options=
           "    s.run(x)\n"
           "(a, b) = (tf.train.Coordinator(), 1)\n"  # 8
           "a.request_stop()\n"                 # 9
           "b.request_stop()\n")
    assert found(src) == [(2, "tfrecord_reader"), (4, "reader.read"), (5, "session"),
                          (6, "traced_run"), (8, "coordinator"), (9, "coordinator.method")]


def test_rebinding_a_name_forgets_the_object():
    src = ("import tensorflow as tf\n"
           "reader = tf.WholeFileReader()\n"   # 2
           "reader.read(q)\n"                  # 3
           "reader = open('labels.txt')\n"
           "reader.read()\n")
    assert found(src) == [(2, "whole_file_reader"), (3, "reader.read")]


def test_function_bodies_see_module_names_bound_after_the_def():
    src = ("import tensorflow as tf\n"
           "def step(q):\n"
           "    return reader.read(q)\n"      # 3: reader is global, bound below
           "reader = tf.WholeFileReader()\n")
    assert found(src) == [(3, "reader.read"), (4, "whole_file_reader")]


def test_xla_and_tracing_spellings():
    src = ("import tensorflow as tf\n"
           "from tensorflow.core.protobuf import config_pb2\n"
           "opts = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)\n"  # 3
           "@tf.function(experimental_compile=True)\n"                                     # 4
           "def f(x):\n"
           "    with tf.xla.experimental.jit_scope():\n"                                  # 6
           "        return x\n"
           "cfg = tf.compat.v1.ConfigProto()\n"                                           # 8
           "cfg.graph_options.optimizer_options.global_jit_level = 1\n"                   # 9
           "other.global_jit_level = 1\n")                                                 # unknown
    assert found(src) == [(3, "run_options"), (4, "experimental_compile"), (6, "jit_scope"),
                          (8, "config_proto"), (9, "global_jit_level")]


def test_supervisor_and_its_methods():
    src = ("import tensorflow as tf\n"
           "sv = tf.train.Supervisor(logdir='x')\n"        # 2
           "with sv.managed_session() as sess:\n"          # 3
           "    while not sv.should_stop():\n"             # 4
           "        sess.run(op)\n")
    assert found(src) == [(2, "supervisor"), (3, "supervisor.method"), (4, "supervisor.method")]


CSV_PIPELINE = (
    "import tensorflow as tf\n"
    "q = tf.train.string_input_producer(files, shuffle=False, num_epochs=2)\n"
    "r = tf.TextLineReader(skip_header_lines=1)\n"
    "_, line = r.read(q)\n"
    "a, b = tf.decode_csv(line, record_defaults=[[0.0], [0]])\n"
    "x = tf.image.resize_images(a, [8, 8])\n"
    "batch = tf.train.shuffle_batch_join([[x, b]] * 4, 64, 10000, 5000)\n")


def test_plan_for_a_csv_pipeline_without_xla():
    report = analyze_source(CSV_PIPELINE, "csv.py")
    (p,) = report.pipelines
    assert p.chain == (
        "ds = tf.data.Dataset.from_tensor_slices(files)\n"
        "ds = ds.repeat(2)\n"
        "ds = ds.flat_map(lambda f: tf.data.TextLineDataset(f).skip(1))\n"
        "ds = ds.map(pipeline_example, num_parallel_calls=4)\n"
        "ds = ds.shuffle(5000)\n"
        "ds = ds.batch(64, drop_remainder=True)\n"
        "ds = ds.prefetch(tf.data.AUTOTUNE)")
    assert p.variants[0].batch().copies.value == 4  # 4 copies of one preprocessing: one map
    assert "jit_compile" not in report.plan  # no XLA and no random ops: nothing to compile


def test_xla_pitfalls_only_when_the_plan_uses_xla(seed_report):
    csv_reader = next(f for f in analyze_source(CSV_PIPELINE, "csv.py").findings
                      if f.rule.id == "text_line_reader")
    seed_reader = next(f for f in seed_report.findings if f.rule.id == "whole_file_reader")
    assert csv_reader.pitfalls == () and seed_reader.pitfalls == ("resize_static",)
    assert {p for f in seed_report.findings for p in f.pitfalls} == set(PITFALLS)


def test_form_feeds_and_cr_line_ends_keep_line_numbers():
    src = "import tensorflow as tf\r\n\x0c\r\nx = 1  # \x0c\rq = tf.train.batch(x, 4)\n"
    (f,) = analyze_source(src, "t.py").findings
    assert (f.line, f.col, f.source) == (4, 5, "q = tf.train.batch(x, 4)")


def test_non_ascii_lines_report_character_columns():
    src = "import tensorflow as tf\nx = 'é✓'; q = tf.train.batch(x, 4)\n"
    (f,) = analyze_source(src, "t.py").findings
    assert src.splitlines()[1][f.col - 1:].startswith("tf.train.batch")


# -- JSON and the CLI -------------------------------------------------------------------------

FINDING_KEYS = {"line", "col", "cell", "category", "rule", "construct", "qualified_name", "via",
                "source", "arguments", "replacement", "pitfalls", "port", "tf_upgrade_v2"}
PIPELINE_KEYS = {"function", "params", "line", "cell", "kind", "end", "ends", "chain",
                 "unresolved", "notes", "legend", "variants", "attributes"}


def test_cli_json_carries_the_same_facts():
    proc = run_module("compare.migrate", str(SEED), "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"format", "script", "nothing_to_migrate", "summary", "notes",
                        "tf_upgrade_v2", "plan", "pipelines", "findings", "see_also"}
    assert doc["format"] == "compare.migrate/2" and doc["nothing_to_migrate"] is False
    (p,) = doc["pipelines"]
    assert set(p) == PIPELINE_KEYS and p["function"] == "<module>"
    assert p["line"] == line_with(SEED, "reader.read(input_queue)") and p["unresolved"] == []
    assert list(doc["summary"]["by_category"]) == list(CATEGORIES)
    assert doc["summary"]["total"] == len(doc["findings"]) == len(analyze_file(SEED).findings)
    counts = collections.Counter(f["category"] for f in doc["findings"])
    assert {c: counts.get(c, 0) for c in CATEGORIES} == doc["summary"]["by_category"]
    for f in doc["findings"]:
        assert set(f) == FINDING_KEYS
        assert f["replacement"] and all(set(p) == {"id", "text"} for p in f["pitfalls"])
        assert f["cell"] is None
        assert f["port"]["modern"]["path"] in ("modern/pipeline.py", "modern/augment.py",
                                               "modern/runner.py")
        assert f["port"]["legacy"] is None or f["port"]["legacy"]["path"].startswith("legacy/")
    lines = [(f["line"], f["col"]) for f in doc["findings"]]
    assert lines == sorted(lines)
    crop = next(f for f in doc["findings"] if f["rule"] == "random_crop")
    assert "stateless_split" in crop["replacement"]
    assert {p["id"] for p in crop["pitfalls"]} == {"stateful_seeds", "autocluster_rng"}


def test_cli_text_report_on_the_seed():
    proc = run_module("compare.migrate", str(SEED), timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == analyze_file(str(SEED)).to_text()
    assert "28 legacy constructs" in proc.stdout


def test_nothing_to_migrate_exits_0(tmp_path):
    script = tmp_path / "modern.py"
    script.write_text("import tensorflow as tf\nds = tf.data.Dataset.range(3).batch(2)\n")
    proc = run_module("compare.migrate", str(script), timeout=60)
    assert proc.returncode == 0 and "nothing to migrate" in proc.stdout, proc
    doc = json.loads(run_module("compare.migrate", str(script), "--json", timeout=60).stdout)
    assert doc["nothing_to_migrate"] is True and doc["findings"] == [] and doc["plan"] == ""
    assert doc["summary"]["total"] == 0


def test_the_script_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "side_effect.py"
    script.write_text(f"import tensorflow as tf\nopen({str(marker)!r}, 'w').write('x')\n"
                      "tf.train.batch(x, 4)\n")
    proc = run_module("compare.migrate", str(script), timeout=60)
    assert proc.returncode == 0 and not marker.exists()


def test_the_library_and_cli_module_need_no_tensorflow():
    code = ("import sys, compare.migrate; from compare.migrate import analyze_source; "
            "analyze_source('import tensorflow as tf\\ntf.Session()'); "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=FIXTURES.parent.parent, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def _bad(tmp_path: Path, name: str, data: bytes | None) -> str:
    p = tmp_path / name
    if data is not None:
        p.write_bytes(data)
    return str(p)


@pytest.mark.parametrize("name,data,needle", [
    ("missing.py", None, "no such file"),
    ("empty.py", b"", "empty file"),
    ("blank.py", b"  \n\n\t\n", "only whitespace"),
    ("syntax.py", b"import tensorflow as tf\ndef f(:\n", "not valid Python 3"),
    ("neither.py", b"import tensorflow as tf\nprint 'hello'\nx = = 1\n", "not valid Python 3"),
    ("latin1.py", b"x = 'caf\xe9'\n", "not UTF-8"),
    ("nul.py", b"x = 1\x00\n", "not valid Python 3"),
    ("cookie.py", b"# -*- coding: klingon -*-\nx = 1\n", "klingon"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, name, data, needle):
    path = _bad(tmp_path, name, data)
    line = assert_one_line_error(run_module("compare.migrate", path, timeout=60), needle)
    assert name in line


def test_a_folder_is_refused(tmp_path):
    assert_one_line_error(run_module("compare.migrate", str(tmp_path), timeout=60),
                          str(tmp_path), "is a folder")


@pytest.mark.parametrize("args,needle", [((), "no script given"), (("a.py", "b.py"), "one script"),
                                         (("--bogus", "a.py"), "bogus")])
def test_wrong_arguments_are_one_line_exit_2(args, needle):
    assert_one_line_error(run_module("compare.migrate", *args, timeout=60), needle)


def test_syntax_error_names_the_line(tmp_path):
    path = _bad(tmp_path, "bad.py", b"x = 1\ny = (\n")
    with pytest.raises(InputError, match=r"bad\.py:2"):
        analyze_file(path)


def test_a_coding_cookie_is_honoured(tmp_path):
    path = _bad(tmp_path, "latin.py",
                b"# -*- coding: latin-1 -*-\nimport tensorflow as tf\ns = 'caf\xe9'\n"
                b"q = tf.train.string_input_producer([s])\n")
    assert [(f.line, f.rule.id) for f in analyze_file(path).findings] == [
        (4, "string_input_producer")]


# -- robustness -------------------------------------------------------------------------------

_SNIPPETS = [
    "import tensorflow as tf", "import tensorflow.compat.v1 as tf", "from tensorflow import *",
    "from tensorflow.python.client import timeline", "r = tf.WholeFileReader()",
    "k, v = r.read(q)", "q = tf.train.string_input_producer(files)", "c = tf.train.Coordinator()",
    "c.join(t)", "j = tf.contrib.compiler.jit.experimental_jit_scope", "with j():\n    pass",
    "def f(tf):\n    return tf.train.batch(x, 2)", "class C:\n    r = tf.TFRecordReader()",
    "tl = timeline.Timeline(m)", "tl.generate_chrome_trace_format()", "del r",
    "cfg.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.ON_1",
    "x = [r for r in rs]", "match x:\n    case [a, *rest]:\n        pass",
    "r = q = tf.FIFOQueue(3, [])",
    "(lambda tf: tf.Session())(1)", "y = (w := tf.train.batch(x, 2))", "global r", "r, *s = t",
    "tf = None", "try:\n    pass\nexcept Exception as c:\n    c.join()",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_SNIPPETS), max_size=12))
def test_any_mix_of_constructs_scans_without_crashing(parts):
    source = "\n".join(parts)
    try:
        report = analyze_source(source, "gen.py")
    except InputError:
        return  # e.g. "global r" at module level is fine, but a bad mix may not parse
    assert all(1 <= f.line <= source.count("\n") + 1 for f in report.findings)
    json.dumps(report.to_json())
    report.to_text()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_gives_a_report_or_an_input_error(text):
    try:
        report = analyze_source(text, "fuzz.py")
    except InputError as e:
        assert "\n" not in str(e) and "fuzz.py" in str(e)
        return
    json.dumps(report.to_json())
    report.to_text()
