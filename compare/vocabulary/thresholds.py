"""Every threshold our judgements use, in one place (times in µs, shares of a step's wall time).

Sources: TensorBoard's input-pipeline analysis (input shares, IteratorGetNext), and our own
measurements on TF 2.21 (BENCHMARKS.md) for the XLA and runtime lines.
"""
from __future__ import annotations

# --- input ---------------------------------------------------------------------------------
#: Input share of the step: below MODERATE not input-bound, from HIGH highly (xprof's lines).
INPUT_MODERATE, INPUT_HIGH = 0.05, 0.20
#: ``IteratorGetNext`` totalling this or less in a step: the input was ready (tiny steps).
GETNEXT_OK_US = 50.0
INPUT_CLASSES = ((INPUT_HIGH, "highly input-bound"), (INPUT_MODERATE, "moderately input-bound"),
                 (0.0, "not input-bound"))


def input_class(share: float) -> str:
    """TensorBoard's words for an input share of the step."""
    return next(words for limit, words in INPUT_CLASSES if share >= limit)


# --- XLA -----------------------------------------------------------------------------------
#: A timeline ``_XlaCompile`` (or excess of a first ``_XlaLaunch``) this long is a compile,
#: not a cache lookup: lookups take 10-100 µs, the smallest real compile (a constant-only
#: cluster on XLA:CPU) 4.4 ms; under CPU contention a lookup stretched past 1 ms once.
COMPILE_MIN_US = 3000.0
#: A launch that takes this many times the steady call (and COMPILE_MIN_US more) compiled.
COMPILE_LAUNCH_FACTOR = 3.0
COMPILE_DOMINATES, COMPILE_NOTABLE = 0.50, 0.10
#: Clusters that run in less than this each, TINY_CLUSTERS_NOTABLE or more of them: XLA's
#: bookkeeping costs more than they save.
TINY_CLUSTER_US = 100.0
TINY_CLUSTERS_NOTABLE = 10

# --- the step ------------------------------------------------------------------------------
IDLE_NOTABLE, IDLE_BOUND = 0.10, 0.30
#: A thread busy SERIAL_BUSY of the step while the other workers average below SERIAL_OTHERS.
SERIAL_BUSY, SERIAL_OTHERS = 0.70, 0.20
#: Timelines: a device busy half the step whose ops hardly overlapped (parallelism below
#: 1.1) with OFF_PATH of the step off the critical path.
TIMELINE_SERIAL_BUSY, TIMELINE_SERIAL_PARALLELISM = 0.50, 1.10
OFF_PATH = 0.20
GPU_IDLE = 0.50
COMPUTE_NOTABLE, COMPUTE_DOMINATES = 0.20, 0.50
#: A stretch of TF's own runtime on a TF thread with no op inside, at least this long, is a
#: thread waiting (for another thread, descheduled, or doing something the trace does not
#: show), not runtime work: executor bookkeeping costs microseconds per op.
BLOCKED_MIN_US = 100.0

# --- comparison ----------------------------------------------------------------------------
#: A side's verdict names its unmapped ops from this share of the step, its runtime overhead
#: from RUNTIME_NOTABLE, untraced time from UNTRACED_NOTABLE.
UNMAPPED_NOTABLE = 0.10
RUNTIME_NOTABLE = 0.15
UNTRACED_NOTABLE = 0.10
#: A stage row's estimated part is flagged in report.md from this share of the row.
ESTIMATED_NOTABLE = 0.05
