"""Shared, expensive fixtures: one real run of each pipeline per test session."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from common import atomic

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Python's bytecode cache, also where the environment turns it off (PYTHONDONTWRITEBYTECODE,
# as on this project's machines): without it each CLI process a test starts compiles our
# modules again (~0.25 s of its ~0.6 s) and every session (every xdist worker) rewrites the
# asserts of all test modules again (~8 s). The caches go into __pycache__ (.gitignore).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
ROOT = Path(__file__).resolve().parent.parent

#: The shared fixtures below that run real TensorFlow pipelines or CLIs (tens of seconds each),
#: and the tier that makes every test using one, directly or through another fixture. A test
#: module's own expensive fixture is covered by that module's ``pytestmark``.
FIXTURE_TIERS: dict[str, tuple[str, ...]] = {
    name: ("slow",) for name in (
        "legacy_run", "legacy_run_noxla", "modern_run", "modern_run_nojit", "varied_jpegs",
        "modern_run_varied", "profile_logdir", "compare_traces_run", "compare_run",
        "jit_profile", "corpus", "hostile_corpus")
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the expected files under tests/golden/ with what the code "
                          "makes now, instead of comparing (review the diff before committing)")


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """``golden(name, text)``: ``text`` must equal ``tests/golden/<name>`` exactly; with
    ``--update-golden`` the file is (re)written instead."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = ROOT / "tests" / "golden" / name
        if update:
            path.parent.mkdir(exist_ok=True)
            atomic.write_text(path, text)
            return
        assert path.exists(), f"{path} missing: run pytest --update-golden and review it"
        assert text == path.read_text(), f"{name} differs (pytest --update-golden rewrites it)"
    return check


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each test the tiers of what it uses (BUILD.md, "Test tiers"): the tiers of its
    fixtures (:data:`FIXTURE_TIERS`), and ``fuzz`` to a hypothesis test, so that the edit loop
    never starts a TensorFlow run or a fuzz campaign through a mark someone forgot."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        tiers = {t for f in fixtures for t in FIXTURE_TIERS.get(f, ())}
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            tiers.add("fuzz")
        for tier in sorted(tiers - {m.name for m in item.iter_markers()}):
            item.add_marker(tier)
    _skip_without_tools(items)


# --- programs from outside Python: a test that needs one skips without it, saying what to
# install; on CI (TESTS_NO_SKIPS, set by .ci/run) a skipped test fails the session ----------

def _missing(tool: str) -> str | None:
    """What to install for ``tool`` ("chromium", "cc"), in a few words, or None when it is
    here (found as the product finds it)."""
    if tool == "chromium":
        from compare.viewers.browser import BrowserError, find_chromium

        try:
            find_chromium()
        except BrowserError as e:
            where = str(e) if os.environ.get("CHROMIUM") else "not on PATH"
            return (f"Debian's chromium ({where}): run .ci/install-tools, or apt-get install "
                    f"chromium")
        return None
    if tool == "cc":
        from modern.bind import compiler

        return None if compiler() else ("a C compiler (no cc, gcc or clang on PATH, no $CC): "
                                        "run .ci/install-tools, or apt-get install gcc")
    raise ValueError(f"@pytest.mark.needs: unknown tool {tool!r}")


def _skip_without_tools(items: list[pytest.Item]) -> None:
    """Skip each test marked ``needs(tool, ...)`` whose tool is not here, saying why."""
    missing: dict[str, str | None] = {}
    for item in items:
        tools = [t for mark in item.iter_markers("needs") for t in mark.args]
        why = next(filter(None, (missing.setdefault(t, _missing(t)) for t in tools)), None)
        if why:
            item.add_marker(pytest.mark.skip(reason=f"needs {why}"))


def pytest_terminal_summary(terminalreporter):
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped and os.environ.get("TESTS_NO_SKIPS"):
        terminalreporter.write_line(f"TESTS_NO_SKIPS: {len(skipped)} test(s) skipped, and none "
                                    f"may be here: this session fails", red=True)


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if os.environ.get("TESTS_NO_SKIPS") and reporter and reporter.stats.get("skipped") \
            and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def legacy_run(tmp_path_factory):
    """One profiled legacy run, XLA on as in the seed: (out folder, run.json dict)."""
    from legacy.runner import run_legacy

    out = tmp_path_factory.mktemp("legacy_xla") / "run"
    return out, run_legacy(out, steps=6, xla=True, seed=1)


@pytest.fixture(scope="session")
def legacy_run_noxla(tmp_path_factory):
    """The same with XLA off (the reference run)."""
    from legacy.runner import run_legacy

    out = tmp_path_factory.mktemp("legacy_noxla") / "run"
    return out, run_legacy(out, steps=4, xla=False, seed=1)


def run_module(module: str, *args: str, timeout: float = 600, cwd: Path | None = None,
               env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` as a user would; capture text output."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=full_env)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit code 2, no traceback, and a one-line ``error:`` naming the input on stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1, proc.stderr
    for n in needles:
        assert n in errors[0], (n, errors[0])
    return errors[0]


# --- bad-input corpus and guarded subprocesses (issue 7) ------------------------------------

@pytest.fixture(scope="session")
def corpus(tmp_path_factory, legacy_run):
    """The bad-input corpus (tests/corpus/make_corpus.py) made from the session's legacy run:
    item name -> path."""
    from tests.corpus import make_corpus

    return make_corpus.make(tmp_path_factory.mktemp("corpus"), legacy_run[0])


@pytest.fixture(scope="session")
def hostile_corpus(tmp_path_factory):
    """The hostile-structure traces of the corpus (issue 19), generated from nothing:
    item name -> path."""
    from tests.corpus import make_corpus

    return make_corpus.make_hostile(tmp_path_factory.mktemp("hostile"))


def run_guarded(module: str, *args: str, timeout: float = 300, mem_gib: float = 8,
                env: dict | None = None, modes_bind_root: bool = False,
                fsize: int | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` like :func:`run_module` (``module="-c"``: ``python -c
    args``), but bounded: address space limited
    to ``mem_gib`` (RLIMIT_AS; TF alone maps ~1.5 GiB), killed after ``timeout`` seconds (the
    test then fails), file size limited to ``fsize`` bytes if given (RLIMIT_FSIZE; Python
    ignores SIGXFSZ, so writes fail with EFBIG). ``modes_bind_root``: drop CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from the child's capability bounding set, so that file modes stop
    even root (tests run as root in CI, and root reads a mode-000 file).
    The result carries ``maxrss_mib`` (the child's peak RSS) and ``elapsed_s``."""
    import ctypes
    import resource
    import tempfile
    import time

    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    libc = ctypes.CDLL(None, use_errno=True)

    def limits() -> None:
        lim = int(mem_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if modes_bind_root and os.geteuid() == 0:
            for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH; PR_CAPBSET_DROP = 24
                if libc.prctl(24, cap, 0, 0, 0) != 0:
                    raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        cmd = [sys.executable, "-c" if module == "-c" else "-m", *([] if module == "-c" else [module]),
               *args]
        proc = subprocess.Popen(cmd, stdout=out, stderr=err,
                                cwd=ROOT, env=full_env, preexec_fn=limits)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                proc.kill()
                proc.wait()
                out.seek(0), err.seek(0)
                pytest.fail(f"{module} {' '.join(args)} still running after {timeout} s: "
                            f"{err.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        result = subprocess.CompletedProcess(proc.args, proc.returncode,
                                             out.read().decode(errors="replace"),
                                             err.read().decode(errors="replace"))
    result.maxrss_mib = usage.ru_maxrss / 1024
    result.elapsed_s = time.monotonic() - t0
    return result


@pytest.fixture(scope="session")
def modern_run(tmp_path_factory):
    """One profiled modern run (XLA on) on the default image, like ``legacy_run``:
    (out folder, run.json dict)."""
    from modern.runner import run_modern

    out = tmp_path_factory.mktemp("modern_jit") / "run"
    return out, run_modern(out, steps=6, jit=True, seed=1)


@pytest.fixture(scope="session")
def modern_run_nojit(tmp_path_factory):
    """The same with XLA off (``modern.run --nojit``), for the generated pairs of issue 14."""
    from modern.runner import run_modern

    out = tmp_path_factory.mktemp("modern_nojit") / "run"
    return out, run_modern(out, steps=6, jit=False, seed=1)


@pytest.fixture(scope="session")
def varied_jpegs(tmp_path_factory):
    """A folder of 50 JPEGs in 10 sizes (portrait, landscape, square; short side 256..600),
    made from grace_hopper.jpg: (folder, paths)."""
    from benchmarks.images import make_image_set

    sizes = [(300, 420), (512, 300), (257, 700), (640, 480), (400, 400),
             (256, 256), (600, 340), (333, 500), (700, 380), (480, 640)]
    folder = tmp_path_factory.mktemp("varied_jpegs")
    return folder, make_image_set(folder, [sizes[i % len(sizes)] for i in range(50)], seed=3)


@pytest.fixture(scope="session")
def modern_run_varied(tmp_path_factory, varied_jpegs):
    """A profiled modern run (XLA on) of 52 steps over the 50 varied JPEGs."""
    from modern.runner import run_modern

    out = tmp_path_factory.mktemp("modern_varied") / "run"
    return out, run_modern(out, images=[str(varied_jpegs[0])], steps=52, jit=True, seed=2)


@pytest.fixture(scope="session")
def profile_logdir(tmp_path_factory, legacy_run, modern_run):
    """A run folder laid out as ``compare.run`` writes it, for TensorBoard: DIR/legacy/ and
    DIR/modern/ are the two pipelines' run folders (each with
    plugins/profile/<session>/<host>.xplane.pb). Returns (DIR, {"legacy": run.json,
    "modern": run.json}). Copies of the session runs, so TensorBoard's caches never land in the
    shared fixtures."""
    import shutil

    root = tmp_path_factory.mktemp("tb_logdir") / "run"
    runs = {}
    for name, (out, run) in (("legacy", legacy_run), ("modern", modern_run)):
        shutil.copytree(out, root / name)
        runs[name] = run
    return root, runs


@pytest.fixture(scope="session")
def compare_traces_run(tmp_path_factory, legacy_run, legacy_run_noxla):
    """``compare.run --legacy --modern`` on two existing runs, as a user would call it: the
    legacy XLA run as "legacy" and the legacy no-XLA run as "modern". (out folder, process)."""
    out = tmp_path_factory.mktemp("compare_traces") / "run"
    proc = run_module("compare.run", "--legacy", str(legacy_run[0]), "--modern",
                      str(legacy_run_noxla[0]), "--out", str(out))
    return out, proc


@pytest.fixture(scope="session")
def compare_run(tmp_path_factory):
    """One real ``python -m compare.run --screenshot`` of both pipelines on the default image,
    few steps: (out folder, process)."""
    out = tmp_path_factory.mktemp("compare_run") / "run"
    proc = run_module("compare.run", "--out", str(out), "--steps", "5", "--screenshot",
                      timeout=1200)
    return out, proc


@pytest.fixture(scope="session")
def jit_profile(tmp_path_factory):
    """A TensorBoard profile of a tf.data pipeline feeding a jit_compile function that is
    called eagerly and from a plain tf.function, four steps (step 0 compiles both)."""
    import tensorflow as tf

    from common import profiling

    @tf.function(jit_compile=True)
    def jitter(x):
        with tf.name_scope("brightness"):
            y = x + 0.1
        with tf.name_scope("flip"):
            z = tf.reverse(y, [1])
        with tf.name_scope("assemble"):
            return tf.stack([y, z])

    @tf.function
    def outer(x):
        with tf.name_scope("clip"):
            return jitter(tf.minimum(x, 1.0))

    with tf.name_scope("read"):
        ds = tf.data.Dataset.range(20).map(
            lambda i: tf.fill([64, 64, 3], tf.cast(i, tf.float32)), num_parallel_calls=2)
    it = iter(ds.prefetch(2))
    out = tmp_path_factory.mktemp("jit")
    with profiling.tensorboard_profile(out):
        for i in range(4):
            with profiling.step("jit", i):
                x = next(it)
                jitter(x).numpy()
                outer(x).numpy()
    return out
