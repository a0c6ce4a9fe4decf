"""``compare.migrate`` on copies of a real module, one after another (issue 30's scale case):
the plans of the copies are the plans of one copy, each moved down by the copies before it; and
the benchmark that times 1 MB and 5 MB of them runs. Timing targets live in BENCHMARKS.md
(``python -m benchmarks.migrate_scan --real default``), not here."""
from __future__ import annotations

import pytest

from benchmarks.migrate_scan import REAL, _shift, concatenated, main, same_plans

#: Modules whose copies are independent: each copy's functions call its own definitions (in a
#: module whose functions call module helpers by name, Python calls the last copy's, so the
#: copies' plans rightly name its lines).
INDEPENDENT = ("wavenet_audio_reader.py", "nsynth_reader.py", "cyclegan_reader.py",
               "kwaugh_multithread_generator.py", "py2_tfrecord_test5.py", "cifar10_input.py",
               "tacotron_datafeeder.py", "tf_docs_simple_shuffle_batch.py")


@pytest.mark.parametrize("name", INDEPENDENT)
def test_the_plans_of_copies_are_the_plans_of_one_copy(name):
    text = (REAL / name).read_text(encoding="utf-8")
    assert same_plans(text, concatenated(text, 4 * len(text)))


def test_same_plans_sees_a_difference():
    text = (REAL / "cifar10_input.py").read_text(encoding="utf-8")
    other = text.replace("shuffle=True", "shuffle=False")
    assert not same_plans(text, text + other)


def test_line_numbers_move_everywhere_a_plan_writes_them():
    plan = "f\n12\nsource at line 3; lines 4-6; lines 7, 9\n5: x: at line 8"
    assert _shift(plan, 10) == "f\n22\nsource at line 13; lines 14-16; lines 17, 19\n15: x: at line 18"


def test_the_benchmark_runs_on_real_copies(capsys):
    assert main(["--real", "tf_docs_simple_shuffle_batch.py,tacotron_datafeeder.py",
                 "--sizes", "10,20"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["script", "size"] and len(out) == 5
    assert out[2].split()[-1] == "same" and out[4].split()[-1] == "same"
    assert int(out[2].split()[1]) >= 20  # the sizes asked for, in KB


def test_the_benchmark_wants_python_scripts():
    with pytest.raises(SystemExit, match="a Python script is needed"):
        main(["--real", "caicloud_queue_runner.ipynb", "--sizes", "10"])


@pytest.mark.parametrize("name", ["wavenet_audio_reader.py", "nsynth_reader.py",
                                  "tacotron_datafeeder.py", "tf_cnn_benchmarks_preprocessing.py",
                                  "cyclegan_reader.py", "sfmlearner_data_loader.py"])
def test_a_constructor_run_once_for_its_methods_gives_the_same_plans_and_port(name,
                                                                               monkeypatch):
    """Methods of one class in every world start from the same run of __init__ (replayed from
    a copy when the decisions it met agree): the plans and the port are what running it each
    time gives."""
    import json

    from compare.migrate import analyze_file
    from compare.migration import flow
    from compare.migration.emit import emit

    def both():
        r = analyze_file(REAL / name)
        return json.dumps(r.to_json(), sort_keys=True), emit(r).text
    replayed = both()
    monkeypatch.setattr(flow._Presim, "fits", lambda self, decisions: False)
    assert both() == replayed
