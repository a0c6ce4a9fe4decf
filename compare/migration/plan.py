"""The report's header prose: the plan in one paragraph (which pipelines there are, and where
the session, XLA and tracing parts go) and what ``tf_upgrade_v2`` would have done instead.

The pipelines themselves, with their tf.data code, come from :mod:`.pipelines`; this paragraph
only points at them, so it never invents a chain for a script that has no input pipeline.
"""
from __future__ import annotations

from typing import Callable

from compare.migration.model import Pipeline
from compare.migration.scan import Finding


def _names(findings: list[Finding], keep: Callable[[Finding], bool], limit: int = 0,
           label: Callable[[Finding], str] = lambda f: f.short) -> str:
    """Distinct labels of the findings ``keep`` accepts, in source order."""
    seen: list[str] = []
    for f in findings:
        if keep(f) and label(f) not in seen:
            seen.append(label(f))
    if limit and len(seen) > limit:
        return ", ".join(seen[:limit]) + ", ..."
    return ", ".join(seen)


def _in(*categories: str) -> Callable[[Finding], bool]:
    return lambda f: f.rule.category in categories


def _pipelines_sentence(pipelines: list[Pipeline]) -> str:
    where = ", ".join(f"{p.function} (line {p.line})" if p.cell is None else
                      f"{p.function} (cell {p.cell}, line {p.line})" for p in pipelines)
    n = len(pipelines)
    text = (f"The script builds one input pipeline, planned below with its tf.data code: {where}."
            if n == 1 else f"The script builds {n} input pipelines, each planned on its own below "
            f"with its tf.data code: {where}.")
    if any(st.random for p in pipelines for v in p.variants for st in v.maps()):
        text += (" Per-example code, augmentation included, stays per example inside one "
                 "Dataset.map; its stateful random draws become stateless ones with a seed per "
                 "example (seeds the script shares stay shared).")
    if any(p.unresolved for p in pipelines):
        text += " What this file cannot settle is listed under each pipeline as unresolved."
    return text


def _no_pipeline_sentence(findings: list[Finding]) -> str:
    feeds = [f for f in findings if f.rule.id == "feed_dict"]
    if feeds:
        lines = ", ".join(str(f.line) for f in feeds[:6]) + (", ..." if len(feeds) > 6 else "")
        return ("No queue, reader or tf.data pipeline to port: the script feeds placeholders "
                f"through feed_dict (line {lines}). To use tf.data, make a Dataset of what it "
                "feeds (from_tensor_slices for arrays in memory, from_generator for a Python "
                "loop) and iterate it in the training loop.")
    return "No input pipeline in this script: nothing to port to tf.data."


def plan(findings: list[Finding], pipelines: list[Pipeline]) -> str:
    """One paragraph: the pipelines (below), then where each other piece goes."""
    if not findings and not pipelines:
        return ""
    cats = {f.rule.category for f in findings}
    text = [_pipelines_sentence(pipelines) if pipelines else _no_pipeline_sentence(findings)]
    if "xla_jit" in cats:
        old_xla = _names(findings, _in("xla_jit"))
        text.append("XLA is switched on per function with @tf.function(jit_compile=True) on code "
                    "fed fixed shapes (call it on dataset elements, outside Dataset.map, which "
                    f"recompiled per shape: 7.2 s/image), so {old_xla} "
                    f"{'go' if ',' in old_xla else 'goes'}.")
    gone = _names(findings, lambda f: f.rule.category in ("queue_runner", "session")
                  and f.rule.id != "estimator", limit=6)
    if gone:
        verb = "goes" if "," not in gone else "go"
        text.append(f"A Python for loop over the dataset replaces the session loop: {gone} {verb}, "
                    "as tf.data starts and stops its own threads.")
    estimators = _names(findings, lambda f: f.rule.id == "estimator", limit=4)
    if estimators:
        verb = "become Keras models" if "," in estimators else "becomes a Keras model"
        text.append(f"tf.estimator is gone in TF 2.21: {estimators} {verb} trained with "
                    "model.fit(dataset), or a loop over the dataset; each input_fn becomes the "
                    "function that returns its dataset.")
    if "tracing" in cats:
        old = _names(findings, lambda f: f.rule.category == "tracing" and f.rule.id != "traced_run")
        text.append("Profile with tf.profiler.experimental.start(logdir) / stop() and "
                    "tf.profiler.experimental.Trace(\"step\", step_num=i, _r=1) around each step, "
                    f"read in TensorBoard's Profile tab, instead of {old or 'FULL_TRACE'} and "
                    "a timeline.json.")
    return " ".join(text)


def upgrade_note(findings: list[Finding]) -> str:
    """What ``tf_upgrade_v2`` would do with these findings, against what we recommend."""
    if not findings:
        return ""
    count = {k: sum(f.upgrade == k for f in findings)
             for k in ("compat_v1", "renamed_same", "contrib_error", "unchanged",
                       "already_compat_v1")}

    def names(*keys: str) -> str:
        return _names(findings, lambda f: f.upgrade in keys, limit=4,
                      label=lambda f: f.via or f.short)

    def n(k: int, what: str) -> str:
        return f"{k} {what}" if k == 1 else f"{k} {what}s"

    said = []
    if count["compat_v1"]:
        said.append(f"rename {count['compat_v1']} to tf.compat.v1 ({names('compat_v1')}), "
                    "which keeps them running as queue runners, readers and sessions")
    if count["renamed_same"]:
        still = " or ".join(w for w, cat in (("stateful", "stateful_random"),
                                              ("a queue", "queue_input"))
                            if any(f.upgrade == "renamed_same" and f.rule.category == cat
                                   for f in findings))
        said.append(f"rename {count['renamed_same']} to TF2 names that do the same thing "
                    f"({names('renamed_same')}: still {still})")
    if count["contrib_error"]:
        said.append(f"mark {n(count['contrib_error'], 'tf.contrib use')} ERROR, as tf.contrib "
                    f"cannot be converted ({names('contrib_error')})")
    left = count["unchanged"] + count["already_compat_v1"]
    if left:
        already = (f"; {count['already_compat_v1']} of them already spelled tf.compat.v1"
                   if count["already_compat_v1"] else "")
        said.append(f"leave {left} as written ({names('unchanged', 'already_compat_v1')}{already})")
    return ("tf_upgrade_v2 (TF 2.21) would " + "; ".join(said) + ". It never builds a tf.data "
            "pipeline, a stateless random op or a jit_compile function; this report recommends "
            "exactly those rewrites.")
