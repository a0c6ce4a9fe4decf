"""``compare/migration/rules.py`` against the installed TensorFlow, as ``tf_upgrade_v2``'s tests
check its tables against the live API: every rule's positional parameters (40 signatures: issue 27 counted 39, before
this test split tf.random.categorical, whose third parameter is dtype, from multinomial) are
the leading parameters of each of its names that ``tf.compat.v1`` still has, in order, and
every TF1 default a plan may state (``TF1_DEFAULTS``) is that parameter's default there. The
names TF 2.21 no longer has (tf.contrib, tf.estimator) are listed, so none is skipped unseen.
Slow: it imports TensorFlow."""
from __future__ import annotations

import inspect

import pytest

from compare.migration.rules import METHOD_RULES, RULES, RULES_BY_ID, TF1_DEFAULTS

pytestmark = pytest.mark.slow

SIGNED = [r for r in RULES + METHOD_RULES if r.params]
#: Rules whose every name is gone from TensorFlow 2.21 (their signatures are TF 1.15's).
GONE = {"slim_provider", "numpy_input_fn", "pandas_input_fn", "bucket_by_sequence_length",
        "bucket"}
#: Names of a rule that take other leading arguments, by design: the rule's parameters are its
#: first name's (placeholder_with_default(input, shape, name) is read by keyword).
OTHER_SIGNATURE = {"tensorflow.placeholder_with_default"}


@pytest.fixture(scope="module")
def v1():
    import tensorflow as tf
    return tf.compat.v1


def live(v1, path: str):
    """The object ``tensorflow.a.b`` names in tf.compat.v1, or None (RecordInput is only in
    data_flow_ops: TF never exported it)."""
    if path == "tensorflow.RecordInput":
        from tensorflow.python.ops import data_flow_ops
        return data_flow_ops.RecordInput
    obj = v1
    for part in path.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def parameters(obj) -> list[str]:
    target = obj.__init__ if inspect.isclass(obj) else obj
    names = list(inspect.signature(target).parameters)
    return names[1:] if inspect.isclass(obj) else names


def test_there_are_40_signatures():
    assert len(SIGNED) == 40


@pytest.mark.parametrize("rule", SIGNED, ids=lambda r: r.id)
def test_a_rule_s_parameters_lead_its_live_signatures(v1, rule):
    found = {p: live(v1, p) for p in rule.paths}
    present = {p: o for p, o in found.items() if o is not None}
    if rule.id in GONE:
        assert not present, f"{rule.id} is in TF 2.21 after all: check it, then drop it from GONE"
        return
    assert present, f"none of {rule.paths} is in tf.compat.v1"
    for path, obj in present.items():
        if path in OTHER_SIGNATURE:
            continue
        assert parameters(obj)[:len(rule.params)] == list(rule.params), path


@pytest.mark.parametrize("rule_id", sorted(TF1_DEFAULTS))
def test_tf1_defaults_are_the_live_defaults(v1, rule_id):
    rule = RULES_BY_ID[rule_id]
    obj = next((o for p in rule.paths if (o := live(v1, p)) is not None), None)
    if obj is None:
        assert rule_id in GONE
        return
    target = obj.__init__ if inspect.isclass(obj) else obj
    sig = inspect.signature(target).parameters
    for param, value in TF1_DEFAULTS[rule_id].items():
        assert sig[param].default == value, (rule_id, param)
