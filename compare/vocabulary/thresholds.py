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
#: not a cache lookup: lookups take tens of µs, the smallest real compile (a constant-only
#: cluster on XLA:CPU) a few ms (BENCHMARKS.md, "Where the thresholds come from").
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
#: Ops covering less than this share of the step get no compute finding (say nothing of them).
COMPUTE_SHOWN = 0.05
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

# --- first runs (one-time work) ------------------------------------------------------------
#: One op execution launching this many GPU kernels or more is cuDNN/cuBLAS autotuning (it
#: tries every algorithm on an op's first call; a steady call launches a handful).
AUTOTUNE_KERNELS = 50
#: A first step this many times the median of the later ones carries one-time work.
FIRST_STEP_FACTOR = 5.0
#: One execution this many times the median of the other executions of its op type (and at
#: least OUTLIER_MIN_US) in a first step: a first call setting something up (cuDNN, cuBLAS).
OUTLIER_FACTOR, OUTLIER_MIN_US = 20.0, 10_000.0
#: A GPU op's launch this long (on TF1's ``<gpu> Compute`` row, or a profile's host launch)
#: and this many times its kernels' device time in the step: CUDA, cuBLAS or cuDNN setting up
#: on the op's first call (a steady launch takes microseconds).
LAUNCH_SETUP_MIN_US, LAUNCH_SETUP_FACTOR = 10_000.0, 10.0
#: A session run's ``_SOURCE`` node on a GPU this long: the device was being set up in this
#: run (its streams and memory); shorter, or on a CPU, it is the executor starting the run.
SOURCE_GPU_SETUP_US = 10_000.0
#: A ``_SOURCE`` this long is worth naming: the run's fixed start-up cost; from RUN_START_NOTABLE
#: of the step a finding, from RUN_START_BOUND the step's bottleneck.
SOURCE_MIN_US = 1_000.0
RUN_START_NOTABLE, RUN_START_BOUND = 0.20, 0.50
#: One-time work covering this share of a first step or more leads the verdict.
ONE_TIME_LEADS = 0.20

# --- launch-bound steps --------------------------------------------------------------------
#: The host rows launching GPU work busy this share of the step or more, the GPU running
#: kernels less than GPU_IDLE of it, at least LAUNCH_MIN_KERNELS kernels whose median is
#: shorter than LAUNCH_SHORT_US: the step is bound by launching many small ops.
LAUNCH_ROW_BUSY = 0.50
LAUNCH_MIN_KERNELS = 10
LAUNCH_SHORT_US = 20.0

# --- copies --------------------------------------------------------------------------------
#: GPU copies running while the GPU runs no kernel, as a share of the step: notable from
#: COPY_NOTABLE, the bottleneck from COPY_BOUND.
COPY_NOTABLE, COPY_BOUND = 0.10, 0.50

# --- communication -------------------------------------------------------------------------
#: Collectives (all-reduce and friends) running while the device computes nothing else, as a
#: share of the step: notable from COMM_NOTABLE, the bottleneck from COMM_BOUND.
COMM_NOTABLE, COMM_BOUND = 0.10, 0.30

# --- words -----------------------------------------------------------------------------------
#: "mostly" is said of a share from this on.
MOSTLY = 0.50

# --- op diff and the two traces' comparability -------------------------------------------
#: An op whose time differs by at most this share of its larger side (or OP_SAME_US) is "same".
OP_SAME_SHARE, OP_SAME_US = 0.05, 1.0
#: A difference in step time (or an op's) is named in the verdict only from this share of the
#: slower step; with a single step on either side, from STEP_NOISE_SINGLE (one profiled step
#: of the same program varies by about that much from run to run), and never below the
#: spread (max - min) of either side's steady steps.
CHANGE_NOTABLE = 0.05
STEP_NOISE_SINGLE = 0.10
#: A difference is tested against the step-to-step spread (a Mann-Whitney U test over the
#: per-step values, :mod:`compare.analysis.noise`) when both sides hold at least
#: MIN_STEPS_TESTED steady steps; it is beyond the spread when p < NOISE_ALPHA.
MIN_STEPS_TESTED = 5
NOISE_ALPHA = 0.05
#: The step difference names its terms (:mod:`compare.analysis.step_delta`) and the ops behind
#: each: this many ops per term.
TERM_OPS = 3
#: An op type's total change is named instead of its nodes when it is this many times the
#: largest node's change (many nodes moving together: "MatMul x6 -21.6 ms").
TYPE_OVER_NODE = 1.5
#: Mixed precision: one side with this many times the other's distinct ``Cast`` nodes, and at
#: least PRECISION_CAST_MIN more (Keras casts each layer's kernel and bias forward and their
#: gradients back: four per layer); twice that many more count without another sign.
PRECISION_CAST_FACTOR, PRECISION_CAST_MIN = 2.0, 8
#: Batch size or input shape: of the compute time matched by node name, at least this share
#: scaled the same way by at least this factor (every op's work grows with the batch).
UNIFORM_SCALE_SHARE, UNIFORM_SCALE_FACTOR = 0.80, 2.0
#: Host dispatch masks a device gain when the device's time per step fell by at least
#: CHANGE_NOTABLE of the step while the device is busy at most MASKED_DEVICE_BUSY of it.
MASKED_DEVICE_BUSY = 0.50
#: Different programs: less than this share of either side's op time matches by name.
SAME_PROGRAM_SHARE = 0.20
#: The same pipeline whatever the op names: the two sides share at least this share of the
#: seed pipeline's stages that either side has time in.
SAME_PIPELINE_SHARE = 0.5
#: The generic view shows a top-level scope with this many numbered copies or more
#: (``clip_by_value_1`` ... ``clip_by_value_49``) as one row.
SCOPE_VARIANTS_MERGED = 5

# --- report size -----------------------------------------------------------------------------
#: Bounded reports whatever the trace: per group the generic view lists this many rows (its
#: largest scopes) and folds the rest into one; the type diff lists this many types and folds
#: the rest; a fused row names this many member ops in report.json (with their total count).
GROUP_ROWS_KEPT = 40
TYPE_ROWS_KEPT = 200
MEMBERS_LISTED = 200
#: Ops fused into several clusters at once (the trace does not say which holds what) are
#: one row named after its clusters: up to this many by name, then their count.
CLUSTERS_NAMED = 3

# --- the regression gate (compare.gate) --------------------------------------------------------
#: Defaults of ``python -m compare.gate``: a regression is a median slowdown above
#: GATE_MAX_SLOWDOWN (of the baseline's median) that the one-sided rank test puts beyond the
#: step-to-step spread at GATE_ALPHA (Holm-adjusted over every item tested), and at least
#: ``--min-effect-us`` long; by default that is GATE_MIN_EFFECT_SHARE of the median step of
#: both sides' steps pooled (a change smaller than that does not move the step).
GATE_MAX_SLOWDOWN = 0.05
GATE_ALPHA = 0.01
GATE_MIN_EFFECT_SHARE = 0.01
