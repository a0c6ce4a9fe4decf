"""The Pipeline compare tab's server side (compare/tab/), without a browser or TensorFlow: the
logdir's sessions and the only names accepted, labels and the default pair, the cache (one
computation per pair however many ask, invalidated when a session changes, bounded in time
and size), the plugin's routes (HTTP 400 for bad names, nothing read or written outside the
logdir but the cache), the entry point, and the page's files (served by the plugin, no other
host named). The comparison itself is a fake child here; tests/test_tab_browser.py runs the
real one."""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib
from werkzeug.test import Client

from compare.output.report import FILES
from compare.tab import cache as cache_mod
from compare.tab import plugin as plugin_mod
from compare.tab.cache import Comparisons, entry_key
from compare.tab.sessions import BadName, default_pair, labels_for, list_sessions, pick
from compare.viewers.tensorboard import profile_runs
from tests.conftest import ROOT


def _session(root: Path, run: str, name: str, files=("vm.xplane.pb",), mtime=None) -> Path:
    folder = root / run / "plugins" / "profile" / name if run else root / "plugins" / "profile" / name
    folder.mkdir(parents=True)
    for f in files:
        (folder / f).write_bytes(b"profile " + f.encode())
        if mtime is not None:
            os.utime(folder / f, (mtime, mtime))
    return folder


def _ours(root: Path, run: str, pipeline: str) -> None:
    (root / run / "run.json").write_text(json.dumps({"pipeline": pipeline}))


@pytest.fixture
def logdir(tmp_path):
    """Sessions of every kind the listing must see or skip."""
    root = tmp_path / "logdir"
    _session(root, "legacy", "2026_01_01_10_00_00", mtime=1000)
    _session(root, "modern", "2026_01_01_10_05_00", mtime=2000)
    _ours(root, "legacy", "legacy")
    _ours(root, "modern", "modern")
    _session(root, "exp/a", "s1", files=("h1.xplane.pb", "h2.xplane.pb"), mtime=3000)
    _session(root, "", "top", mtime=500)                                   # a run at the logdir
    _session(root, "tf23", "old", files=("host.trace.json.gz",), mtime=400)   # TF 2.2/2.3
    (root / "empty" / "plugins" / "profile" / "nothing").mkdir(parents=True)  # no profile file
    _session(root, ".pipeline_compare", "hidden")                          # the cache: skipped
    outside = _session(tmp_path / "elsewhere", "x", "secret")
    link = root / "linked" / "plugins" / "profile"
    link.mkdir(parents=True)
    (link / "escape").symlink_to(outside, target_is_directory=True)        # out of the logdir
    inside = root / "legacy" / "plugins" / "profile" / "2026_01_01_10_00_00" / "vm.xplane.pb"
    (link.parent.parent / "plugins" / "profile" / "inlink").mkdir()
    (link / "inlink" / "x.xplane.pb").symlink_to(inside)                   # inside: listed
    return root


def test_the_listing_names_sessions_as_the_profile_plugin_does(logdir):
    names = [s.name for s in list_sessions(logdir)]
    assert names == ["exp/a/s1", "legacy/2026_01_01_10_00_00", "linked/inlink",
                     "modern/2026_01_01_10_05_00", "tf23/old", "top"]
    # the profile plugin's names for the xplane sessions (compare.viewers.tensorboard
    # .profile_runs predicts them; tests/test_tensorboard.py holds the plugin to it), less the
    # link out of the logdir and the tab's own hidden cache
    xplane = {s.name for s in list_sessions(logdir) if s.hosts}
    assert xplane == set(profile_runs(logdir)) - {"linked/escape", ".pipeline_compare/hidden"}
    by = {s.name: s for s in list_sessions(logdir)}
    assert by["exp/a/s1"].hosts == ("h1", "h2") and by["tf23/old"].hosts == ()
    assert (by["legacy/2026_01_01_10_00_00"].pipeline, by["exp/a/s1"].pipeline) == ("legacy", None)


def test_only_listed_names_are_accepted(logdir):
    listing = {s.name: s for s in list_sessions(logdir)}
    assert pick("exp/a/s1", listing).path == logdir / "exp/a/plugins/profile/s1"
    for bad, why in (("", "no side A given"), (None, "no side A given"),
                     ("../elsewhere/x/secret", "is a path"), ("/etc/passwd", "is a path"),
                     ("legacy/../modern/2026_01_01_10_05_00", "is a path"),
                     ("legacy\\2026", "is a path"), ("legacy//x", "is a path"),
                     ("a\x00b", "is a path"), ("linked/escape", "not a profile session"),
                     (".pipeline_compare/hidden", "not a profile session"),
                     ("legacy/2099_01_01_00_00_00", "not a profile session"),
                     ("x" * 2000, "is a path")):
        with pytest.raises(BadName, match=re.escape(why)):
            pick(bad, listing, "side A")


def test_labels_and_the_default_pair(logdir):
    s = {x.name: x for x in list_sessions(logdir)}
    leg, mod = s["legacy/2026_01_01_10_00_00"], s["modern/2026_01_01_10_05_00"]
    assert default_pair(list(s.values())) == (leg, mod)                  # our two pipelines
    assert labels_for(leg, mod) == ("legacy", "modern")
    assert labels_for(leg, s["exp/a/s1"]) == ("legacy", "exp/a")          # run names
    assert labels_for(s["top"], s["tf23/old"]) == ("top", "old")           # session folders
    assert labels_for(leg, mod, (" old ", "")) == ("old", "modern")
    for given, why in ((("same", "same"), "two different labels"),
                       (("x" * 61, None), "at most 60"), (("tab\there", None), "printable"),
                       (("modern", None), "two different labels")):
        with pytest.raises(BadName, match=why):
            labels_for(leg, mod, given)
    # not our pipelines: the two latest, older as A
    others = [x for x in s.values() if not x.pipeline]
    assert [x.name for x in default_pair(others)] == ["linked/inlink", "exp/a/s1"]
    assert default_pair(others[:1]) is None


def test_the_cache_key_changes_with_the_sessions_files_and_labels(logdir):
    def pair():
        s = {x.name: x for x in list_sessions(logdir)}
        return s["legacy/2026_01_01_10_00_00"], s["modern/2026_01_01_10_05_00"]

    a, b = pair()
    k = entry_key(a, b, ("legacy", "modern"))
    assert entry_key(*pair(), ("legacy", "modern")) == k
    assert entry_key(a, b, ("legacy", "new")) != k
    assert entry_key(b, a, ("legacy", "modern")) != k
    # what the profile plugin writes into a session folder does not invalidate it
    (a.path / ".cached_tools.json").write_text("{}")
    (a.path / "vm.hlo_proto.pb").write_bytes(b"x")
    assert entry_key(*pair(), ("legacy", "modern")) == k
    (a.path / "vm.xplane.pb").write_bytes(b"profile written again")  # the profile changed
    assert entry_key(*pair(), ("legacy", "modern")) != k


# --- the cache's jobs, with a fake comparison ----------------------------------------------

FAKE = r'''
import json, os, sys, time
def spec():
    with open(os.environ["FAKE_SPEC"]) as f:
        return json.load(f)
time.sleep(spec().get("imports", 0))           # what the real child spends importing
with open(spec()["started"], "a") as f:
    f.write(f"{os.getpid()} {time.time()}\n")
line = sys.stdin.readline()
if not line.strip():
    sys.exit(0)
args = json.loads(line)
spec = spec()                                  # the test's wishes when the job comes
with open(spec["count"], "a") as f:
    f.write(args["a"] + "\n")
print("[   0.0s] converting profiles (xprof) and loading traces ...", file=sys.stderr, flush=True)
time.sleep(spec.get("sleep", 0))
if spec.get("fail"):
    print("compare.tab.compute: error: " + spec["fail"], file=sys.stderr)
    sys.exit(2)
os.makedirs(args["out"], exist_ok=True)
report = {"order": [args["label_a"], args["label_b"]], "a": args["a"]}
for name, doc in (("report.json", report), ("timelines.json", {"version": 1}),
                  ("report.md", "# r")):
    with open(os.path.join(args["out"], name), "w") as f:
        f.write(json.dumps(doc) if name.endswith(".json") else doc)
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake_compute.py"
    script.write_text(FAKE)
    count, started = tmp_path / "count.txt", tmp_path / "started.txt"

    spec_file = tmp_path / "spec.json"
    monkeypatch.setenv("FAKE_SPEC", str(spec_file))

    def configure(**spec):
        spec_file.write_text(json.dumps({"count": str(count), "started": str(started), **spec}))
        return (sys.executable, str(script))

    configure.calls = lambda: count.read_text().splitlines() if count.exists() else []
    configure.started = lambda: started.read_text().splitlines() if started.exists() else []
    return configure


def _wait(comparisons, a, b, labels, timeout=30.0, retry=False):
    deadline = time.monotonic() + timeout
    st = comparisons.status(a, b, labels, retry=retry)
    while st.state == "running":
        assert time.monotonic() < deadline, st
        time.sleep(0.05)
        st = comparisons.status(a, b, labels)
    return st


def _pair(logdir):
    s = {x.name: x for x in list_sessions(logdir)}
    return s["legacy/2026_01_01_10_00_00"], s["modern/2026_01_01_10_05_00"]


def test_concurrent_first_requests_compute_once(logdir, tmp_path, fake):
    command = fake(sleep=1.0)
    a, b = _pair(logdir)
    labels = ("legacy", "modern")
    # two "processes": two caches over one folder (their lock is a file), many requests each
    first, second = Comparisons(tmp_path / "cache", command=command), \
        Comparisons(tmp_path / "cache", command=command)
    states = []
    threads = [threading.Thread(target=lambda c=c: states.append(_wait(c, a, b, labels)))
               for c in (first, second) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [s.state for s in states] == ["done"] * 8
    assert fake.calls() == [str(a.path)]
    folder = states[0].folder
    assert json.loads((folder / "report.json").read_text())["order"] == ["legacy", "modern"]
    # later requests: from the cache, nothing started
    assert first.status(a, b, labels).state == "done" and fake.calls() == [str(a.path)]
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".tmp-")]


def test_a_changed_session_is_compared_again(logdir, tmp_path, fake):
    comparisons = Comparisons(tmp_path / "cache", command=fake())
    a, b = _pair(logdir)
    one = _wait(comparisons, a, b, ("legacy", "modern"))
    (a.path / "vm.xplane.pb").write_bytes(b"a new profile of the same session")
    a, b = _pair(logdir)
    two = _wait(comparisons, a, b, ("legacy", "modern"))
    assert one.folder != two.folder and len(fake.calls()) == 2


def test_an_error_is_one_sentence_and_retried_only_when_asked(logdir, tmp_path, fake):
    comparisons = Comparisons(tmp_path / "cache", command=fake(fail="/x/vm.xplane.pb: damaged"))
    a, b = _pair(logdir)
    st = _wait(comparisons, a, b, ("legacy", "modern"))
    assert (st.state, st.message) == ("error", "/x/vm.xplane.pb: damaged")
    assert comparisons.status(a, b, ("legacy", "modern")).state == "error"
    assert len(fake.calls()) == 1                        # polling does not start it again
    fake()                                               # the session was fixed
    assert _wait(comparisons, a, b, ("legacy", "modern"), retry=True).state == "done"
    assert len(fake.calls()) == 2
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_a_comparison_that_takes_too_long_is_stopped(logdir, tmp_path, fake):
    comparisons = Comparisons(tmp_path / "cache", timeout_s=1.0, command=fake(sleep=60))
    a, b = _pair(logdir)
    t0 = time.monotonic()
    st = _wait(comparisons, a, b, ("legacy", "modern"))
    assert st.state == "error" and "took longer than 1 s" in st.message
    assert time.monotonic() - t0 < 15
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.slow  # waits out a child's 3 s of imports
def test_a_child_started_ahead_takes_the_first_job(logdir, tmp_path, fake):
    """The first view does not wait for the child's imports: one is started ahead, and the
    next is started when a job takes it."""
    comparisons = Comparisons(tmp_path / "cache", command=fake(imports=3.0))
    comparisons.warm()
    comparisons.warm()                                     # once
    deadline = time.monotonic() + 30
    while len(fake.started()) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    spare = int(fake.started()[0].split()[0])
    t0 = time.monotonic()
    assert _wait(comparisons, *_pair(logdir), ("legacy", "modern")).state == "done"
    assert time.monotonic() - t0 < 2.5                     # no 3 s of imports in it
    assert len(fake.calls()) == 1 and not _alive(spare)    # the spare did it, and is done
    while len(fake.started()) < 2:                         # the next one, ahead again
        assert time.monotonic() < deadline
        time.sleep(0.05)
    nxt = int(fake.started()[1].split()[0])
    assert _alive(nxt)
    comparisons.stop()
    assert not _alive(nxt)


def test_children_end_with_the_process_that_started_them(tmp_path, fake):
    """A child waiting for a job reads its stdin: when TensorBoard is killed, it ends."""
    command = fake()
    code = (f"import sys, time, json; sys.path.insert(0, {str(ROOT)!r})\n"
            f"from compare.tab.cache import Comparisons\n"
            f"c = Comparisons({str(tmp_path / 'cache')!r}, command={command!r})\n"
            f"c.warm(); print(c._spare.proc.pid, flush=True); time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child):
            assert time.monotonic() < deadline, "the child outlived its TensorBoard"
            time.sleep(0.05)
    finally:
        parent.kill()


def test_the_cache_keeps_the_most_recently_viewed(logdir, tmp_path, fake, monkeypatch):
    monkeypatch.setattr(cache_mod, "MAX_ENTRIES", 3)
    root = tmp_path / "cache"
    for k in range(5):
        (root / f"old{k}").mkdir(parents=True)
        os.utime(root / f"old{k}", (1000 + k, 1000 + k))
    comparisons = Comparisons(root, command=fake())
    st = _wait(comparisons, *_pair(logdir), ("legacy", "modern"))
    kept = sorted(p.name for p in root.iterdir() if not p.name.startswith("."))
    assert kept == sorted([st.folder.name, "old4", "old3"])


def test_the_cache_falls_back_when_the_logdir_is_read_only(tmp_path, monkeypatch):
    root = tmp_path / "ro"
    root.mkdir()
    assert cache_mod.default_root(root) == root / ".pipeline_compare"
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    fallback = cache_mod.default_root(root)
    assert fallback.parent == Path.home() / ".cache" / "tf-pipeline-compare" / "tab"


# --- the plugin's routes ---------------------------------------------------------------------

@pytest.fixture
def make_plugin(monkeypatch):
    """The plugin as TensorBoard makes it, its comparisons made by ``command``."""
    def make(logdir, command, cache=""):
        monkeypatch.setattr(plugin_mod, "Comparisons", functools.partial(Comparisons,
                                                                          command=command))
        flags = SimpleNamespace(logdir=str(logdir), pipeline_compare_cache=cache,
                                pipeline_compare_timeout=60.0)
        return plugin_mod.PipelineComparePlugin(SimpleNamespace(logdir=str(logdir), flags=flags))
    return make


def _get(plugin, route, **params):
    app = plugin.get_plugin_apps()["/static/*" if route.startswith("/static/") else route]
    resp = Client(app).get(route, query_string=params)
    return resp.status_code, resp.get_data()


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file() and ".pipeline_compare" not in p.parts}


def test_routes_reject_paths_and_unknown_names_with_400(logdir, fake, make_plugin):
    plugin = make_plugin(logdir, fake())
    ok = {"a": "legacy/2026_01_01_10_00_00", "b": "modern/2026_01_01_10_05_00"}
    for params in ({**ok, "a": "../elsewhere"}, {**ok, "b": "/etc/passwd"},
                   {**ok, "a": "legacy/2099"}, {**ok, "b": "linked/escape"}, {"a": ok["a"]},
                   {**ok, "b": ok["a"]}, {**ok, "label_a": "x", "label_b": "x"},
                   {**ok, "a": "legacy/../../../etc"}):
        for route in ("/compare", "/file"):
            code, body = _get(plugin, route, **params, name="report.md")
            assert code == 400, (route, params, body)
            assert json.loads(body)["error"]
    assert not fake.calls()
    code, body = _get(plugin, "/file", **ok, name="../../etc/passwd")
    assert code == 400 and b"not a report file" in body
    assert _get(plugin, "/static/../plugin.py")[0] == 404
    assert _get(plugin, "/static/%2e%2e%2fplugin.py")[0] == 404


def test_sessions_compare_and_file_read_nothing_outside_and_write_only_the_cache(logdir, fake,
                                                                              make_plugin):
    before = _tree(logdir)
    plugin = make_plugin(logdir, fake())
    assert plugin.is_active()
    code, body = _get(plugin, "/sessions")
    doc = json.loads(body)
    assert code == 200 and doc["default"] == {"a": "legacy/2026_01_01_10_00_00",
                                              "b": "modern/2026_01_01_10_05_00",
                                              "labels": ["legacy", "modern"]}
    ok = {"a": doc["default"]["a"], "b": doc["default"]["b"], "retry": "1"}
    code, body = _get(plugin, "/compare", **ok)
    deadline = time.monotonic() + 30
    while code == 202:
        running = json.loads(body)
        assert running["state"] == "running" and isinstance(running["lines"], list)
        assert time.monotonic() < deadline
        time.sleep(0.05)
        code, body = _get(plugin, "/compare", a=ok["a"], b=ok["b"])
    done = json.loads(body)
    assert code == 200 and done["state"] == "done"
    folder = logdir / ".pipeline_compare" / entry_key(*_pair(logdir), ("legacy", "modern"))
    assert done["report"] == json.loads((folder / "report.json").read_text())
    assert done["timelines"] == {"version": 1}
    assert done["pair"]["a"]["name"] == ok["a"] and done["pair"]["labels"] == ["legacy", "modern"]
    assert done["files"] == ["report.json", "report.md", "timelines.json"]
    code, body = _get(plugin, "/file", a=ok["a"], b=ok["b"], name="report.md")
    assert (code, body) == (200, b"# r")
    assert _tree(logdir) == before            # the logdir itself untouched


def test_one_session_only_says_so_in_one_sentence(tmp_path, fake, make_plugin):
    root = tmp_path / "one"
    _session(root, "run", "s1")
    plugin = make_plugin(root, fake())
    assert not plugin.is_active()
    doc = json.loads(_get(plugin, "/sessions")[1])
    assert "default" not in doc
    assert doc["message"] == (f"{root} holds one profile session (run/s1); the tab compares "
                              f"two: profile another run into this logdir.")


def test_the_page_is_served_by_the_plugin_and_names_no_other_host(logdir, fake, make_plugin):
    plugin = make_plugin(logdir, fake())
    meta = plugin.frontend_metadata()
    assert (meta.es_module_path, meta.tab_name) == ("/index.js", "Pipeline compare")
    files = sorted(p.name for p in plugin_mod.STATIC.iterdir())
    assert files == ["adapter.js", "dom.js", "format.js", "index.js", "style.css", "table.js",
                     "timeline.js", "waterfall.js"]
    code, index = _get(plugin, "/index.js")
    assert code == 200
    imported = set(re.findall(rb"from '\./static/([\w.]+)'", index))
    for name in files:
        code, body = _get(plugin, f"/static/{name}")
        assert code == 200, name
        imported |= set(re.findall(rb"from '\./([\w.]+)'", body))
        # the SVG namespace names no host to fetch from; nothing else may
        urls = set(re.findall(rb"[a-z]+://[^\s'\"`)]*", body)) - {b"http://www.w3.org/2000/svg"}
        assert not urls, (name, urls)
    assert {n.decode() for n in imported} <= set(files)


def test_the_entry_point_is_declared_and_installed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["tensorboard_plugins"] == {
        "pipeline_compare": "compare.tab.plugin:PipelineCompareLoader"}
    found = {ep.name: ep for ep in metadata.entry_points(group="tensorboard_plugins")}
    assert "pipeline_compare" in found, (
        "the installed tf-pipeline-compare predates the Pipeline compare tab: pip install -e .")
    assert found["pipeline_compare"].load() is plugin_mod.PipelineCompareLoader


def test_report_files_include_the_timelines():
    assert FILES["timelines_json"] == "timelines.json"


def _child(job: dict | None, hold: bool = True, timeout: float = 120):
    """Run the real ``python -m compare.tab.compute`` with ``job`` on its stdin, which stays
    open until it exits (``hold``) or is closed right after the job."""
    proc = subprocess.Popen([sys.executable, "-m", "compare.tab.compute"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    proc.stdin.write(json.dumps(job) + "\n" if job is not None else "")
    proc.stdin.flush()
    if not hold:
        proc.stdin.close()
    try:
        rc = proc.wait(timeout=timeout)
        return rc, proc.stderr.read()   # a few lines: no pipe fills meanwhile
    finally:
        proc.kill()
        for f in (proc.stdin, proc.stderr):
            f.close()


@pytest.mark.slow
def test_the_real_child_writes_the_data_and_ends_with_its_stdin(tmp_path):
    from tests.synthetic import CPU, write

    def events(decode):
        out = []
        for k in range(3):
            out += [(CPU, 0, k * 1000, decode, "DecodeJpeg", f"decode/DecodeJpeg_{k}"),
                    (CPU, 0, k * 1000 + decode, 100, "ResizeBilinear", f"resize/R_{k}")]
        return out + [(CPU, 0, 3000, 0, "NoOp", "end")]

    a = write(tmp_path / "a" / "timeline.json", events(600), steps=[0, 1000, 2000])
    b = write(tmp_path / "b" / "timeline.json", events(200), steps=[0, 1000, 2000])
    job = {"a": str(a), "b": str(b), "out": str(tmp_path / "out"), "label_a": "old",
           "label_b": "new"}
    rc, err = _child(job)
    assert rc == 0, err
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["report.json", "tf.log", "timelines.json"]          # data only
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["order"] == ["old", "new"] and report["schema_version"] == 4
    assert report["files"] == {"report_json": "report.json", "timelines_json": "timelines.json"}
    assert "writing report.json and timelines.json" in err
    # TensorBoard gone mid-way (stdin closed): the child ends, nothing half written
    rc, err = _child({**job, "out": str(tmp_path / "out2")}, hold=False)
    assert rc == 1 and not (tmp_path / "out2" / "report.json").exists()
    # bad input: one line, exit 2
    rc, err = _child({**job, "a": str(tmp_path / "nope"), "out": str(tmp_path / "out3")})
    assert rc == 2 and err.strip().splitlines() == [
        f"compare.tab.compute: error: {tmp_path / 'nope'}: no such file or folder"]
    rc, err = _child({"a": "x"})
    assert rc == 2 and "the job line has no b, out, label_a, label_b" in err
    assert _child(None, hold=False)[0] == 0                     # no job ever came


def test_launch_adds_the_tab_only_where_the_entry_point_is_missing(monkeypatch):
    """``python -m compare.tab.launch``: TensorBoard with the tab from a source checkout."""
    from compare.tab import launch
    from compare.viewers import tensorboard as tensorboard_viewer

    made = []

    class FakeTensorBoard:
        def __init__(self, plugins):
            made.append(plugins)
            self.main, self.configure = None, None

    monkeypatch.setattr(launch.program, "TensorBoard", FakeTensorBoard)
    monkeypatch.setattr(launch.app, "run", lambda main, flags_parser: None)
    monkeypatch.setattr(launch.main_lib, "global_init", lambda: None)
    monkeypatch.setattr(launch.default, "get_plugins", lambda: ["tensorboard's own"])
    real = metadata.entry_points
    monkeypatch.setattr(launch.sys, "argv", ["compare.tab.launch", "--logdir", "x"])
    for installed in (True, False):
        monkeypatch.setattr(tensorboard_viewer.metadata, "entry_points",
                            lambda group, real=real, i=installed: [
                                ep for ep in real(group=group)
                                if i or ep.name != "pipeline_compare"])
        assert tensorboard_viewer.tab_installed() is installed
        launch.main()
        assert made[-1] == ["tensorboard's own"] + (
            [] if installed else [plugin_mod.PipelineCompareLoader])


def test_a_page_that_says_what_it_has_seen_is_answered_when_there_is_news(logdir, fake,
                                                                        make_plugin):
    """``compare?seen=N`` (a long poll): a running comparison answers only with more than N
    progress lines, at its end, or after LONG_POLL_S; so the page learns the end at once."""
    plugin = make_plugin(logdir, fake(sleep=1.0))
    ok = {"a": "legacy/2026_01_01_10_00_00", "b": "modern/2026_01_01_10_05_00"}
    code, body = _get(plugin, "/compare", **ok, retry="1")
    assert code == 202
    seen = len(json.loads(body)["lines"])
    answers = []
    deadline = time.monotonic() + 30
    while code == 202:
        assert time.monotonic() < deadline
        t0 = time.monotonic()
        code, body = _get(plugin, "/compare", **ok, seen=str(seen))
        took = time.monotonic() - t0
        doc = json.loads(body)
        if code == 202:   # news, or the long poll's end
            assert len(doc["lines"]) > seen or took >= plugin_mod.LONG_POLL_S, (took, doc)
            seen = len(doc["lines"])
        answers.append(code)
    assert doc["state"] == "done" and len(answers) <= 4, answers
