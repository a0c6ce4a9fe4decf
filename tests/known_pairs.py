"""Trace pairs with a known change, generated, and the true answer beside them (issue 24 item 3).

    pair = make_pair(Params(form="xprof", device="gpu", steps=5, noise=0.03,
                            change="longer", delta_us=400, seed=7), tmp_path)
    pair.a, pair.b        # the two trace files: the program as it was (A), changed once (B)
    pair.truth            # what changed, by how much per steady step, and the step's change

**The program** is one training step of a small dense network (forward, loss, gradients,
updates: ``PROGRAM``), fed by ``IteratorGetNext``; on a GPU its batch is copied to the device
(``_Send`` on the host, ``MemcpyH2D``) and its loss back. ``seed`` scales every op's time
(0.6-1.4x, the same on both sides) and draws the per-step noise (each op's time times
``1 + U(-noise, noise)``, drawn apart for each side and step). With several steps the first
runs its ops 1.25x longer (warm-up); compare.run leaves it out.

**Forms**, written as TensorFlow writes them:

- ``timeline``: ``tensorflow.python.client.timeline.Timeline`` itself, fed ``StepStats``
  protos built field by field as TF1's executor and GPU tracer fill them
  (:class:`tests.fixtures.make_timelines.Recorder`): ``<cpu> Compute``; on a GPU the
  executor's launches on ``<gpu> Compute``, kernels on ``stream:all`` and ``stream:14``,
  copies on ``memcpy`` and their stream (real TF1 GPU timelines put copies on ``memcpy`` and
  ``stream:N`` only, not on ``stream:all``). One session run per file, or several runs
  appended in one file (each from its ``_SOURCE``), as users append traced runs.
- ``xprof``: the trace viewer JSON xprof makes of a TensorBoard profile, laid out as the real
  ones in ``tests/fixtures/real_pairs`` and ``real_traces``. A CPU program as TF 2.21 writes it
  (``/host:CPU`` pid 701, a ``python`` thread with ``train N`` step markers
  (``step_num``), ``tf_Compute/...`` threads with ``ExecutorState::Process`` around the ops,
  ``long_name`` = ``node:Type``); a GPU program as TF 2.3-2.5 Keras profiles are (pid 501
  host with ``TraceContext`` step markers and ``train_function`` on ``python3``, launches
  named by their kernel on ``tf_Compute`` threads, ``/device:GPU:0`` with
  ``Stream #19(Compute)``, ``Stream #20(MemcpyH2D)``, ``Stream #21(MemcpyD2H)`` and the
  derived ``Steps``, ``TensorFlow Name Scope`` and ``TensorFlow Ops`` lines; the host's
  ``MemcpyH2D`` call inside the ``_Send`` of ``IteratorGetNext``).

**Changes** (``Params.change``; B differs from A by exactly this):

- ``longer`` / ``shorter``: op ``op`` (an index into ``PROGRAM``) runs ``delta_us`` longer or
  shorter (its kernel, on a GPU);
- ``added`` / ``removed``: op ``op`` runs only in B / only in A;
- ``fused``: ``fused_ops`` ops from ``op`` on run inside one XLA cluster in B, taking
  ``ratio`` of their former time (TF1: ``_XlaLaunch`` of ``cluster_0``; TF2: ``_XlaCompile``
  (a cache hit), ``_XlaRun`` of ``cluster_0_1`` and ``_XlaMerge``; its XLA kernels on the
  GPU's stream, or nested in ``_XlaRun`` on the CPU, named by HLO op). Neither JSON form can
  list the ops a cluster holds; the truth does;
- ``idle``: B waits ``delta_us`` with nothing traced in the middle of each step;
- ``straddle`` (xprof only: a session run's ops cannot start before its ``_SOURCE``): in A
  an op runs across the step window's ``edge`` ("start" or "end") with ``inside`` of it in
  the window; in B it runs inside, ``delta_us`` longer. On a GPU it is a host op of the step
  (``GatherV2`` with the step's ``group_id``) beside the device's step row; on a CPU a
  tf.data map op on a ``tf_data_private_threadpool`` thread (no step of its own) across the
  step marker;
- ``copy`` (GPU only): the batch's host-to-device copy takes ``delta_us`` longer; it is
  drawn on ``memcpy`` and ``stream:15`` (timeline) or as the host's ``MemcpyH2D`` call and
  the device's transfer (xprof).

**The truth** is computed from the events written (never from the parameters): a step
window is the session run (timeline: from its ``_SOURCE`` to the next run's, the last to its
last event), the step marker (xprof, CPU) or the device's step row (xprof, GPU: its first to
its last device event); steady steps are all but the first (a single step is its own). An
op's time per steady step is the overlap of its events with the steady windows (self time:
what nests in it is not its own), summed, over the number of steady steps. A GPU op's time is
its kernels' and a copy's its transfer on the device, each counted once, plus, in a TF1
timeline, its launch on the ``<gpu> Compute`` row (the executor's time in the op on the host;
xprof names its launches after the kernels, which are not op time); the host's copy calls
are not op time. The step time is the mean steady window (the comparison's tables are means,
which add up).

:func:`explain_case` makes single traces for explain, each with what must lead its verdict:
``first_launch`` (TF1 GPU, the only session run: the first launches of two ops take hundreds
of ms while their kernels take under 1 ms: ``one_time``), ``host_copy`` (xprof GPU: the
host's ``MemcpyH2D`` calls inside ``_Send`` of ``IteratorGetNext`` take most of the step:
``copy``), ``empty_device`` (xprof: GPU processes whose rows hold no event while the host
sits in ``EagerExecute``: ``no_data``).

``python -m tests.known_pairs --change straddle --form xprof --device gpu --out DIR`` writes
one pair and prints its truth (the minimised failing cases of BUILD.md are given that way).
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np

from tests.fixtures.make_timelines import FLOAT, INT32, STRING, Recorder, tf_timeline_modules

FORMS = ("timeline", "xprof")
DEVICES = ("cpu", "gpu")
CHANGES = ("longer", "shorter", "added", "removed", "fused", "idle", "straddle", "copy")
#: Changes that only some forms or devices can show (see the module docstring).
ONLY_XPROF = frozenset({"straddle"})
ONLY_GPU = frozenset({"copy"})


@dataclasses.dataclass(frozen=True)
class Params:
    """One generated pair (see the module docstring for each field's meaning)."""

    form: str = "timeline"
    device: str = "cpu"
    steps: int = 1
    noise: float = 0.0
    change: str = "longer"
    op: int = 0
    delta_us: float = 500.0
    seed: int = 0
    fused_ops: int = 3
    ratio: float = 0.5
    edge: str = "start"
    inside: float = 0.5

    def __post_init__(self) -> None:
        if self.form not in FORMS or self.device not in DEVICES or self.change not in CHANGES:
            raise ValueError(f"unknown form, device or change: {self}")
        if self.change in ONLY_XPROF and self.form != "xprof":
            raise ValueError(f"{self.change} needs the xprof form")
        if self.change in ONLY_GPU and self.device != "gpu":
            raise ValueError(f"{self.change} needs a GPU")
        if self.steps < 1 or not 0 <= self.noise < 0.5 or not 0 < self.inside < 1:
            raise ValueError(f"steps >= 1, 0 <= noise < 0.5, 0 < inside < 1: {self}")

    def short(self) -> str:
        """A test id: ``xprof-gpu-5steps-longer``."""
        return f"{self.form}-{self.device}-{self.steps}step{'s' * (self.steps > 1)}-{self.change}"


@dataclasses.dataclass
class Truth:
    """The true answer of a pair, per steady step (µs)."""

    change: str
    op: str                          # what changed: a node name, a cluster, "" for idle time
    names: frozenset[str]            # the names a report may give it by (node, cluster, copy)
    op_type: str
    a_us: float                      # its time in A and B
    b_us: float
    delta_us: float
    step_a_us: float                 # median steady step of each side
    step_b_us: float
    members: tuple[str, ...] = ()    # fused: the ops now inside the cluster
    term: str = ""                   # what it belongs to: its group, or "idle"
    others_max_us: float = 0.0       # the largest |delta| of any other op (the noise)
    #: the op's delta were each event counted whole in its own step, not clipped to the
    #: window (an event of no step, such as a tf.data thread's, counting nowhere)
    whole_delta_us: float = 0.0
    #: B - A of its launches on the host per steady step (a GPU op's, not op time)
    launch_delta_us: float = 0.0
    ops_a: dict[str, float] = dataclasses.field(default_factory=dict, repr=False)
    ops_b: dict[str, float] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def step_delta_us(self) -> float:
        return self.step_b_us - self.step_a_us

    def summary(self) -> dict:
        out = dataclasses.asdict(self)
        out["names"] = sorted(self.names)
        out["step_delta_us"] = round(self.step_delta_us, 3)
        for k in ("ops_a", "ops_b"):
            out.pop(k)
        return out


@dataclasses.dataclass
class Pair:
    a: Path
    b: Path
    truth: Truth
    params: Params


# --------------------------------------------------------------------------------------------
# the program

EIGEN = "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<...>, long>"


@dataclasses.dataclass(frozen=True)
class OpSpec:
    name: str
    type: str
    us: float        # CPU: the op's run; GPU: its kernel
    kernel: str      # the CUDA kernel it runs on a GPU
    group: str = "compute"


#: One training step of a two-layer dense network, in the order its executor runs it.
PROGRAM = (
    OpSpec("dense/MatMul", "MatMul", 900, "volta_sgemm_128x64_nn"),
    OpSpec("dense/BiasAdd", "BiasAdd", 150, "void tensorflow::BiasNHWCKernel<float>"),
    OpSpec("dense/Relu", "Relu", 120, EIGEN),
    OpSpec("dense_1/MatMul", "MatMul", 650, "volta_sgemm_64x32_sliced1x4_nn"),
    OpSpec("dense_1/BiasAdd", "BiasAdd", 90, "void tensorflow::BiasNHWCKernel<float>"),
    OpSpec("loss/SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
           260, "void tensorflow::functor::SparseXentKernel<float, int>"),
    OpSpec("gradients/dense_1/MatMul_grad/MatMul", "MatMul", 560, "volta_sgemm_128x32_tn"),
    OpSpec("gradients/dense_1/MatMul_grad/MatMul_1", "MatMul", 600,
           "volta_sgemm_32x32_sliced1x4_nt"),
    OpSpec("gradients/dense/Relu_grad/ReluGrad", "ReluGrad", 130, EIGEN),
    OpSpec("gradients/dense/MatMul_grad/MatMul_1", "MatMul", 820, "volta_sgemm_128x32_tn"),
    OpSpec("GradientDescent/update_dense/kernel/ApplyGradientDescent", "ApplyGradientDescent",
           160, EIGEN, "optimizer"),
    OpSpec("GradientDescent/update_dense_1/kernel/ApplyGradientDescent",
           "ApplyGradientDescent", 110, EIGEN, "optimizer"),
)
BATCH, FEATURES = 64, 256
BATCH_BYTES = BATCH * FEATURES * 4
#: The op that straddles a step window (``straddle``), on a GPU (host) and on a CPU (tf.data).
STRADDLE_GPU = OpSpec("embedding/embedding_lookup", "GatherV2", 700, "", "compute")
STRADDLE_CPU = OpSpec("ParseSingleExample/ParseExample/ParseExampleV2", "ParseExampleV2", 700,
                      "", "input")
COPY_EDGE = "edge_19_IteratorGetNext"
#: Executor and tracer details (µs).
GAP, LAUNCH, GET_NEXT, SEND = 4, 9, 40, 25
#: Between two session runs appended in one timeline (Python), and two profiled TF2 steps.
BETWEEN_RUNS, BETWEEN_STEPS = 20, 150
WARM_UP = 1.25


def _cluster(form: str, device: str) -> tuple[str, str, frozenset[str]]:
    """(node name, op type, names a report may give it) of the XLA cluster."""
    if form == "timeline":
        node = "cluster_0/_0/_1" if device == "gpu" else "cluster_0"
        return node, "_XlaLaunch", frozenset({node, "cluster_0"})
    return "cluster_0_1/xla_run", "_XlaRun", frozenset({"cluster_0_1/xla_run", "cluster_0_1",
                                                         "cluster_0"})


# --------------------------------------------------------------------------------------------
# one side as events, in a neutral form both writers read

@dataclasses.dataclass
class Ev:
    """One event. ``row``: ``host`` (an op on the host: the CPU executor, a tf_Compute
    thread), ``launch`` (a GPU op's launch on the host), ``kernel``, ``copy`` (a transfer on
    the device), ``host_copy`` (xprof: the host's call of a copy), ``tfdata`` (an op of a
    tf.data map on a tf.data thread), ``source`` (TF1's ``_SOURCE``). ``key``: the op whose
    time it is (None: not op time)."""

    row: str
    name: str
    type: str
    ts: float
    dur: float
    step: int
    thread: int = 0
    kernel: str = ""
    key: str | None = None
    parent: int | None = None        # the event it nests in (self time)
    nbytes: int = 0

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclasses.dataclass
class Planned:
    """One op as a step runs it: its time (CPU run or GPU kernels) and what it is."""

    name: str
    type: str
    us: float
    kernel: str = ""
    pieces: int = 1                  # kernels (an XLA cluster runs several)
    idle: bool = False               # not an op: the executor waits this long


class Side:
    """Lays out one side's steps (see the module docstring) and keeps the step windows."""

    def __init__(self, p: Params, which: str) -> None:
        self.p, self.which = p, which
        self.rng = np.random.default_rng([p.seed, 0 if which == "a" else 1])
        self.scale = np.random.default_rng([p.seed, 7]).uniform(0.6, 1.4, len(PROGRAM))
        self.q = 1.0 if p.form == "timeline" else 0.001   # timelines hold whole µs
        self.ev: list[Ev] = []
        self.windows: list[tuple[float, float]] = []

    # -- what a step runs -----------------------------------------------------------------
    def planned(self, k: int) -> list[Planned]:
        p, b = self.p, self.which == "b"
        noise = 1 + self.rng.uniform(-p.noise, p.noise, len(PROGRAM)) if p.noise else \
            np.ones(len(PROGRAM))
        warm = WARM_UP if k == 0 and p.steps > 1 else 1.0
        ops = [Planned(s.name, s.type, s.us * self.scale[i] * noise[i] * warm, s.kernel)
               for i, s in enumerate(PROGRAM)]
        x = p.op % len(PROGRAM)
        if p.change in ("longer", "shorter") and b:
            sign = 1 if p.change == "longer" else -1
            ops[x].us = max(ops[x].us + sign * abs(p.delta_us), 0.2 * ops[x].us)
        elif (p.change == "added" and not b) or (p.change == "removed" and b):
            del ops[x]
        elif p.change == "fused" and b:
            ops = self._fuse(ops, x)
        elif p.change == "idle" and b:
            ops.insert(len(ops) // 2, Planned("idle", "", abs(p.delta_us), idle=True))
        return ops

    def _fuse(self, ops: list[Planned], x: int) -> list[Planned]:
        n = max(2, min(self.p.fused_ops, len(ops) - x))
        x = min(x, len(ops) - n)
        node, op_type, _ = _cluster(self.p.form, self.p.device)
        us = max(sum(o.us for o in ops[x:x + n]) * self.p.ratio, 20.0)
        cluster = Planned(node, op_type, us, "fusion", pieces=min(n, 4))
        return ops[:x] + [cluster] + ops[x + n:]

    # -- building -------------------------------------------------------------------------
    def add(self, row, name, type_, ts, dur, step, **kw) -> int:
        q = self.q
        self.ev.append(Ev(row, name, type_, round(round(ts / q) * q, 3),
                          round(max(round(dur / q) * q, q), 3), step, **kw))
        return len(self.ev) - 1

    def build(self) -> "Side":
        t = 0.0
        between = BETWEEN_RUNS if self.p.form == "timeline" else BETWEEN_STEPS
        for k in range(self.p.steps):
            first = len(self.ev)
            lo, hi = (self._gpu_step if self.p.device == "gpu" else self._cpu_step)(k, t)
            self.windows.append((lo, hi))
            if self.p.change == "straddle":
                self._straddle(k, first, t - between)
            t = max(max(e.end for e in self.ev[first:]), self.windows[-1][1]) + between
        if self.p.form == "timeline":  # a run ends where the next begins (its _SOURCE)
            self.windows = [(w[0], nxt[0]) for w, nxt in zip(self.windows, self.windows[1:])] \
                + self.windows[-1:]
        return self

    def _cpu_step(self, k: int, t: float) -> tuple[float, float]:
        """A CPU step: one executor runs the ops one after another. Its window: the session
        run (timeline) or the python thread's step marker (xprof), which opens first."""
        lo = t
        if self.p.form == "timeline":
            self.add("source", "_SOURCE", "NoOp", t, 3, k)
        else:
            t += 60      # the marker, then the call that runs the step's function
        t = self._host_op("IteratorGetNext", "IteratorGetNext", t + GAP, GET_NEXT, k)
        for op in self.planned(k):
            if op.idle:
                t += op.us
            elif op.pieces > 1 and self.p.form == "xprof":
                t = self._xla_on_cpu(op, t, k)
            else:
                t = self._host_op(op.name, op.type, t, op.us, k)
        if self.p.form == "timeline":   # the run ends with its last event
            self._host_op("_retval_loss_0_0", "_Retval", t, 3, k)
            return lo, self.ev[-1].end
        return lo, t + 30

    def _host_op(self, name: str, type_: str, t: float, us: float, k: int,
                 thread: int = 0) -> float:
        i = self.add("host", name, type_, t, us, k, thread=thread, key=name)
        return self.ev[i].end + GAP

    def _xla_on_cpu(self, op: Planned, t: float, k: int) -> float:
        """TF2 on a CPU: a cache hit of _XlaCompile, _XlaRun with its XLA kernels nested (each
        named by its HLO op; the cluster's time), then _XlaMerge."""
        t = self._host_op("cluster_0_1/xla_compile", "_XlaCompile", t, 15, k)
        run = self.add("host", op.name, op.type, t, op.us, k, key=op.name)
        inner, at = op.us - 6.0 * op.pieces, t + 3
        for j in range(op.pieces):
            dur = inner / op.pieces
            self.add("kernel", op.name, op.type, at, dur, k, kernel=_hlo_op(j), key=op.name,
                     parent=run)
            at += dur + 6
        return self._host_op("cluster_0_1/merge_oidx_0", "_XlaMerge", self.ev[run].end + GAP,
                             3, k)

    def _gpu_step(self, k: int, t: float) -> tuple[float, float]:
        """A GPU step: the host fetches the batch and sends it to the GPU, then launches the
        ops one after another; each kernel runs once its launch is done and the stream is
        free. Its window: the session run (timeline) or the device's step row (xprof: its
        first to its last device event)."""
        timeline = self.p.form == "timeline"
        first = len(self.ev)
        if timeline:
            self.add("source", "_SOURCE", "NoOp", t, 3, k)
            self.add("source", "_SOURCE", "NoOp", t + 2, 3, k, thread=1)
        host = self._host_op("IteratorGetNext", "IteratorGetNext", t + 8, GET_NEXT, k)
        gpu_free, host = self._input_copy(k, host)
        for op in self.planned(k):
            if op.idle:
                host = max(host, gpu_free) + op.us
                gpu_free = host
                continue
            if op.pieces > 1 and not timeline:   # TF2: _XlaCompile (a cache hit) first
                host = self._host_op("cluster_0_1/xla_compile", "_XlaCompile", host, 15, k,
                                     thread=1)
            gpu_free, host = self._kernels(op, k, host, gpu_free)
        self._output_copy(k, gpu_free)
        if timeline:
            return t, max(e.end for e in self.ev[first:])
        dev = [e for e in self.ev[first:] if e.row in ("kernel", "copy")]
        return min(e.ts for e in dev), max(e.end for e in dev)

    def _kernels(self, op: Planned, k: int, host: float, gpu_free: float
                 ) -> tuple[float, float]:
        """The op's launch(es) on the host and its kernel(s) on the stream: TF1's executor row
        holds one event per op, xprof's host thread one per kernel launched."""
        timeline = self.p.form == "timeline"
        if timeline:
            self.add("launch", op.name, op.type, host, LAUNCH * op.pieces, k, thread=1,
                     kernel=op.kernel)
        for j in range(op.pieces):
            kernel = _hlo_op(j) if op.pieces > 1 else op.kernel
            launch = host + (LAUNCH + 3) * (j if timeline else 0)
            if not timeline:
                self.add("launch", op.name, op.type, host, LAUNCH, k, thread=1, kernel=kernel)
                host += LAUNCH + 3
            start = max(gpu_free, launch + LAUNCH + 3)
            dur = op.us / op.pieces
            self.add("kernel", op.name, op.type, start, dur, k, kernel=kernel, key=op.name)
            gpu_free = start + dur + 2
        if timeline:
            host += LAUNCH * op.pieces + 3
        return gpu_free, host

    def _input_copy(self, k: int, host: float) -> tuple[float, float]:
        """The batch to the GPU: ``_Send`` on the host (xprof: the host's ``MemcpyH2D`` call
        nested in it), the transfer on the device (timeline: ``_Recv`` on the GPU executor).
        Returns (GPU free, host free)."""
        us = 180.0 * self.scale[0] + (abs(self.p.delta_us) if
                                      self.p.change == "copy" and self.which == "b" else 0.0)
        if self.p.form == "timeline":
            self.add("host", "IteratorGetNext/_1", "_Send", host, SEND, k, key="IteratorGetNext/_1")
            self.add("launch", "IteratorGetNext/_2", "_Recv", host + 3, 9, k, thread=1)
            c = self.add("copy", COPY_EDGE, "MEMCPYHtoD", host + SEND + 2, us, k, key=COPY_EDGE,
                         nbytes=BATCH_BYTES)
            return self.ev[c].end + 2, host + SEND + 6
        send = self.add("host", "IteratorGetNext/_1", "_Send", host, us + 2 * SEND, k,
                        thread=1, key="IteratorGetNext/_1")
        call = self.add("host_copy", COPY_EDGE, "MemcpyH2D", host + SEND, us + 4, k, thread=1,
                        parent=send, nbytes=BATCH_BYTES)
        c = self.add("copy", COPY_EDGE, "MemcpyH2D", self.ev[call].ts + 2, us, k,
                     key=COPY_EDGE, nbytes=BATCH_BYTES)
        return self.ev[c].end + 2, self.ev[send].end + GAP

    def _output_copy(self, k: int, gpu_free: float) -> None:
        """The loss back to the host, then (TF1) the run's end on the host."""
        edge = "edge_31_loss/SparseSoftmaxCrossEntropyWithLogits"
        kind = "MEMCPYDtoH" if self.p.form == "timeline" else "MemcpyD2H"
        c = self.add("copy", edge, kind, gpu_free + 3, 6, k, key=edge, nbytes=4 * BATCH)
        done = self.ev[c].end + 4
        if self.p.form == "timeline":
            self.add("host", "loss/_4", "_Recv", done, 6, k, key="loss/_4")
            self._host_op("_retval_loss_0_0", "_Retval", done + 9, 3, k)

    # -- the straddling op ----------------------------------------------------------------
    def _straddle(self, k: int, first: int, prev_end: float) -> None:
        """Place the op that straddles a step window (A) or runs inside it (B); a step that it
        would reach into from before (``prev_end``: where the last one's events end) is moved
        later, so the op meets one window only."""
        spec = STRADDLE_GPU if self.p.device == "gpu" else STRADDLE_CPU
        lo, hi = self.windows[-1]
        d = spec.us * self.scale[0] * (
            1 + self.rng.uniform(-self.p.noise, self.p.noise) if self.p.noise else 1.0)
        if self.which == "b":
            d = max(d + self.p.delta_us, 0.2 * d)
            start = lo + 0.1 * (hi - lo)
            if start + d > hi:
                start = max(lo, hi - d)
        elif self.p.edge == "start":
            start = lo - (1 - self.p.inside) * d
        else:
            start = hi - self.p.inside * d
        if k and start < prev_end + BETWEEN_RUNS:
            by = prev_end + BETWEEN_RUNS - start
            self._shift(first, by)
            start += by
        on_gpu = self.p.device == "gpu"
        self.add("host" if on_gpu else "tfdata", spec.name, spec.type, start,
                 min(d, self.windows[-1][1] - start) if self.which == "b" else d,
                 k if on_gpu else -1, thread=2, key=spec.name)

    def _shift(self, first: int, by: float) -> None:
        for e in self.ev[first:]:
            e.ts = round(e.ts + by, 3)
        lo, hi = self.windows[-1]
        self.windows[-1] = (lo + by, hi + by)


def _hlo_op(j: int) -> str:
    return ("fusion", "dot.3", "fusion.1", "reduce.7")[j % 4]


# --------------------------------------------------------------------------------------------
# the truth, from the events

def op_times(side: Side) -> dict[str, float]:
    """Each op's time per steady step: its events' self time inside the steady windows."""
    windows = side.windows[1:] if len(side.windows) > 1 else side.windows
    children: dict[int, list[Ev]] = {}
    for e in side.ev:
        if e.parent is not None:
            children.setdefault(e.parent, []).append(e)
    out: dict[str, float] = {}
    for i, e in enumerate(side.ev):
        if side.p.form == "timeline" and e.row == "launch" and e.key is None:
            # the op's box on TF1's <gpu> Compute row: its host time, before its kernels
            own = sum(_overlap(e, w) for w in windows)
            out[e.name] = out.get(e.name, 0.0) + own / len(windows)
            continue
        if e.key is None:
            continue
        own = sum(_overlap(e, w) for w in windows)
        inner = sum(_overlap(c, w) for c in children.get(i, ()) for w in windows)
        out[e.key] = out.get(e.key, 0.0) + (own - inner) / len(windows)
    return out


def whole_times(side: Side) -> dict[str, float]:
    """Each op's time per steady step with every event counted whole in the step it belongs
    to, as if no window clipped it: its own step (xprof's group), else the window it starts
    in (none: it counts nowhere)."""
    steady = set(range(1, side.p.steps)) if side.p.steps > 1 else {0}
    out: dict[str, float] = {}
    for e in side.ev:
        step = e.step if e.step >= 0 else next(
            (k for k, (lo, hi) in enumerate(side.windows) if lo <= e.ts < hi), -1)
        if e.key is not None and step in steady:
            out[e.key] = out.get(e.key, 0.0) + e.dur / len(steady)
    return out


def launch_times(side: Side) -> dict[str, float]:
    """Each GPU op's launches on the host per steady step (the truth's op time leaves them
    out; TF1's executor row is where they are)."""
    windows = side.windows[1:] if len(side.windows) > 1 else side.windows
    out: dict[str, float] = {}
    for e in side.ev:
        if e.row == "launch":
            out[e.name] = out.get(e.name, 0.0) + sum(_overlap(e, w) for w in windows) / len(
                windows)
    return out


def _overlap(e: Ev, w: tuple[float, float]) -> float:
    return max(0.0, min(e.end, w[1]) - max(e.ts, w[0]))


def step_time(side: Side) -> float:
    windows = side.windows[1:] if len(side.windows) > 1 else side.windows
    return float(np.mean([hi - lo for lo, hi in windows]))


def truth_of(p: Params, a: Side, b: Side) -> Truth:
    ta, tb = op_times(a), op_times(b)
    op, names, op_type, members, term = _what_changed(p)
    if p.change == "fused":
        a_us = sum(ta.get(m, 0.0) for m in members)
        b_us = tb.get(op, 0.0)
        others = (set(ta) | set(tb)) - set(members) - {op}
    else:
        a_us, b_us = ta.get(op, 0.0), tb.get(op, 0.0)
        others = (set(ta) | set(tb)) - {op}
    noise = max((abs(tb.get(o, 0.0) - ta.get(o, 0.0)) for o in others), default=0.0)
    whole = _delta(whole_times(a), whole_times(b), op, members)
    launch = _delta(launch_times(a), launch_times(b), op, members)
    return Truth(p.change, op, names, op_type, round(a_us, 3), round(b_us, 3),
                 round(b_us - a_us, 3), round(step_time(a), 3), round(step_time(b), 3),
                 members, term, round(noise, 3), round(whole, 3), round(launch, 3), ta, tb)


def _delta(a: dict[str, float], b: dict[str, float], op: str, members: tuple[str, ...]
           ) -> float:
    """B's ``op`` against A's ``op`` (or, for a cluster, against A's ops it took)."""
    return b.get(op, 0.0) - (sum(a.get(m, 0.0) for m in members) if members else a.get(op, 0.0))


def _what_changed(p: Params) -> tuple[str, frozenset[str], str, tuple[str, ...], str]:
    """(op, names, type, members, term) of the planted change."""
    spec = PROGRAM[p.op % len(PROGRAM)]
    if p.change == "fused":
        node, op_type, names = _cluster(p.form, p.device)
        n = max(2, min(p.fused_ops, len(PROGRAM) - p.op % len(PROGRAM)))
        x = min(p.op % len(PROGRAM), len(PROGRAM) - n)
        return node, names, op_type, tuple(s.name for s in PROGRAM[x:x + n]), "xla_run"
    if p.change == "idle":
        return "", frozenset(), "", (), "idle"
    if p.change == "straddle":
        s = STRADDLE_GPU if p.device == "gpu" else STRADDLE_CPU
        return s.name, frozenset({s.name}), s.type, (), s.group
    if p.change == "copy":
        kind = "MEMCPYHtoD" if p.form == "timeline" else "MemcpyH2D"
        # compare.run drops a copy edge's number (README: "copy edge numbers dropped")
        return COPY_EDGE, frozenset({COPY_EDGE, "edge_IteratorGetNext", kind}), kind, (), "copy"
    return spec.name, frozenset({spec.name}), spec.type, (), spec.group


# --------------------------------------------------------------------------------------------
# writing: TF's own timeline.py, and xprof's trace viewer JSON

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU_SHORT = "/device:GPU:0"
#: TF1 timelines count µs since the epoch.
EPOCH_US = 1_600_000_000_000_000


def write_timeline(side: Side, path: Path) -> Path:
    """The side as TF1's executor and GPU tracer record it, written by TF's timeline.py."""
    rec = Recorder()
    prev: dict[str, str] = {}
    for e in sorted(side.ev, key=lambda e: e.ts):
        ts, dur = int(EPOCH_US + e.ts), int(e.dur)
        if e.row == "source":
            rec.op(GPU0 if e.thread else CPU0, "_SOURCE", "NoOp", ts, dur)
        elif e.row in ("host", "launch"):
            dev = GPU0 if e.row == "launch" else CPU0
            inputs = [prev[dev]] if dev in prev else []
            rec.op(dev, e.name, e.type, ts, dur, inputs=inputs, outputs=_outputs(e),
                   allocator="gpu_bfc" if e.row == "launch" else "cpu")
            prev[dev] = e.name
        elif e.row == "kernel":
            rec.kernel(GPU_SHORT, 14, e.name, e.type, e.kernel, ts, dur)
        elif e.row == "copy":
            kind = e.type.removeprefix("MEMCPY")
            rec.memcpy(GPU_SHORT, 15 if kind == "HtoD" else 16, e.name, kind, e.nbytes, ts, dur)
    timeline = tf_timeline_modules()[1]
    text = timeline.Timeline(rec.step_stats()).generate_chrome_trace_format(
        show_dataflow=True, show_memory=True)
    path.write_text(text)
    return path


def _outputs(e: Ev) -> list[tuple]:
    if e.type in ("NoOp", "_Retval", "_Send", "_XlaMerge", "ApplyGradientDescent"):
        return []
    if e.type == "IteratorGetNext":
        return [(FLOAT, (BATCH, FEATURES), BATCH_BYTES), (INT32, (BATCH,), 4 * BATCH)]
    if e.type == "_XlaCompile":
        return [(STRING, (), 8)]
    return [(FLOAT, (BATCH, FEATURES), BATCH_BYTES)]


class Xprof:
    """Trace viewer JSON as xprof writes it (see the module docstring for the two styles)."""

    STEPS, SCOPES, TF_OPS = 3735928559, 3735928561, 3735928562
    STREAMS = {"kernel": 19, "MemcpyH2D": 20, "MemcpyD2H": 21}

    def __init__(self, gpu: bool) -> None:
        self.gpu = gpu
        self.host = 501 if gpu else 701
        self.python = "python3" if gpu else "python"
        self.events: list[dict] = []
        self.meta: list[dict] = []
        self.tids: dict[tuple[int, str], int] = {}
        self.correlation = 128_400

    def process(self, pid: int, name: str) -> None:
        self.meta += [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}},
                      {"ph": "M", "pid": pid, "name": "process_sort_index",
                       "args": {"sort_index": pid}}]

    def thread(self, pid: int, name: str, tid: int | None = None) -> int:
        if (pid, name) not in self.tids:
            tid = tid if tid is not None else _thread_id(name)
            self.tids[(pid, name)] = tid
            self.meta += [{"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": name}},
                          {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                           "args": {"sort_index": len(self.tids)}}]
        return self.tids[(pid, name)]

    def x(self, pid: int, thread: str, name: str, ts: float, dur: float, args: dict,
          tid: int | None = None) -> None:
        ev = {"pid": pid, "tid": self.thread(pid, thread, tid), "ts": round(ts, 3),
              "name": name, "ph": "X", "dur": round(dur, 3)}
        if args:
            ev["args"] = args
        self.events.append(ev)

    def document(self) -> dict:
        events = sorted(self.events, key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
        return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True},
                "traceEvents": self.meta + events + [{}]}


def _thread_id(name: str) -> int:
    """A stable tid from a thread's name (xprof's are hashes)."""
    return int.from_bytes(name.encode(), "little") % 4_000_000_000 + 1000


def write_xprof(side: Side, path: Path) -> Path:
    """The side as xprof's trace viewer shows its TensorBoard profile (gzipped JSON)."""
    gpu = side.p.device == "gpu"
    w = Xprof(gpu)
    w.process(w.host, "/host:CPU")
    if gpu:
        w.process(1, "/device:GPU:0")
        for name, tid in (("Stream #19(Compute)", 19), ("Stream #20(MemcpyH2D)", 20),
                          ("Stream #21(MemcpyD2H)", 21), ("Steps", Xprof.STEPS),
                          ("TensorFlow Name Scope", Xprof.SCOPES),
                          ("TensorFlow Ops", Xprof.TF_OPS)):
            w.thread(1, name, tid)
    for k, (lo, hi) in enumerate(side.windows):
        _xprof_step(w, side, k, lo, hi)
    for i, e in enumerate(side.ev):
        _xprof_event(w, side, i, e)
    path.write_bytes(gzip.compress(json.dumps(w.document()).encode(), mtime=0))
    return path


def _xprof_step(w: Xprof, side: Side, k: int, lo: float, hi: float) -> None:
    """The step's marks: the python thread's step marker and calls (on a GPU around the
    host's side of the step, which starts before the device's), the device's step row (GPU),
    and each executor thread's ``ExecutorState::Process`` around its ops."""
    evs = [e for e in side.ev if e.step == k]
    group = {"group_id": str(k)}
    if w.gpu:
        lo_host = min(e.ts for e in evs) - 50
        hi_host = max(max(e.end for e in evs), hi) + 30
        w.x(w.host, w.python, "TraceContext", lo_host, hi_host - lo_host,
            group | {"batch_size": str(BATCH), "epoch_num": "1", "graph_type": "train",
                     "step_name": f"train {k}", "step_num": str(k)})
        w.x(1, "Steps", str(k), lo, hi - lo, group | {"step_name": f"train {k}"}, Xprof.STEPS)
    else:
        lo_host, hi_host = lo, hi
        w.x(w.host, w.python, f"train {k}", lo, hi - lo,
            group | {"step_name": f"train {k}", "step_num": str(k)})
    _python_call(w, lo_host + 10, hi_host - 5, group)
    for thread in sorted({e.thread for e in evs if e.row in ("host", "launch", "host_copy")}):
        mine = [e for e in evs if e.thread == thread and e.row in ("host", "launch",
                                                                      "host_copy")]
        for t0, t1 in _bursts(mine):
            w.x(w.host, _compute_thread(thread), "ExecutorState::Process", t0 - 3, t1 - t0 + 6,
                group | {"id": str(-3078195252876914522 + k), "iter_num": "0"})


#: The executor's ``ExecutorState::Process`` returns when no op is ready: a thread idle
#: longer than this between two ops is outside it.
PROCESS_GAP_US = 50.0


def _bursts(evs: list[Ev]) -> list[tuple[float, float]]:
    """The stretches of a thread's events with no gap over ``PROCESS_GAP_US``."""
    out: list[list[float]] = []
    for e in sorted(evs, key=lambda e: e.ts):
        if out and e.ts - out[-1][1] <= PROCESS_GAP_US:
            out[-1][1] = max(out[-1][1], e.end)
        else:
            out.append([e.ts, e.end])
    return [(a, b) for a, b in out]


def _python_call(w: Xprof, lo: float, hi: float, group: dict) -> None:
    """The python thread calling the step's function, nested as TF writes it: Keras'
    ``train_function`` (TF 2.3) or the tf.function's name (TF 2.21), ``EagerExecute``, the
    local execution, and the kernel execution in which the thread waits for the function's
    ops (TF 2.21 also ``KernelAndDeviceFunc::Run``), its executor started by ``FunctionRun``."""
    fn = "__inference_train_function_1127" if w.gpu else "__inference_train_step_57"
    calls = ([("train_function", {"tf_function_call": "notTraced-nonXla", "tracing_count": "2"}),
              ("TFE_Py_ExecuteCancelable", {}), (f"EagerExecute: {fn}", {}),
              (f"EagerLocalExecute: {fn}", {}), ("EagerKernelExecute", {})] if w.gpu else
             [("train_step", {"tf_function_call": "notTraced-nonXla", "tracing_count": "1"}),
              ("TFE_Py_ExecuteCancelable", {}), ("EagerExecute", {"eager_op": fn, "is_func": "1"}),
              (f"EagerLocalExecute: {fn}", {}), ("EagerKernelExecute", {}),
              ("KernelAndDeviceFunc::Run", {})])
    for depth, (name, args) in enumerate(calls):
        w.x(w.host, w.python, name, lo + 4 * depth, hi - lo - 8 * depth, group | args)
    w.x(w.host, w.python, "FunctionRun", lo + 4 * len(calls), 30, group)


def _compute_thread(thread: int) -> str:
    return ("tf_Compute/1854902252", "tf_Compute/-225505685", "tf_Compute/778768923")[thread]


def _xprof_event(w: Xprof, side: Side, i: int, e: Ev) -> None:
    group = {"group_id": str(e.step)} if e.step >= 0 else {}
    if e.row == "host":
        w.x(w.host, _compute_thread(e.thread), e.type, e.ts, e.dur,
            group | {"is_eager": "0", "long_name": f"{e.name}:{e.type}"} | _send_args(e))
    elif e.row == "tfdata":
        w.x(w.host, "tf_data_private_threadpool/8038035851692836160", e.type, e.ts, e.dur,
            {"is_eager": "0", "long_name": f"{e.name}:{e.type}"})
    elif e.row == "launch":
        w.correlation += 1
        w.x(w.host, _compute_thread(e.thread), e.kernel, e.ts, e.dur,
            group | {"context_id": "$$1", "correlation_id": str(w.correlation)})
    elif e.row == "kernel" and not w.gpu:   # XLA:CPU: one event per HLO op, on the thread
        w.x(w.host, _compute_thread(e.thread), e.kernel, e.ts, e.dur,
            group | {"hlo_module": _HLO_MODULE, "hlo_op": e.kernel, "run_id": "-1"})
    elif e.row == "kernel":
        _xprof_kernel(w, e, group)
    elif e.row == "copy":
        _xprof_copy(w, e, group)
    elif e.row == "host_copy":
        w.x(w.host, _compute_thread(e.thread), e.type, e.ts, e.dur,
            group | {"context_id": "$$1", "correlation_id": str(w.correlation),
                     "memcpy_details": f"size:{e.nbytes} dest:0 async:1"})


#: The module of the cluster, as TF 2.21 names it: the cluster (``cluster_0``), not the node
#: of its run (``cluster_0_1/xla_run``).
_HLO_MODULE = ("cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__"
               "XlaNumConstantArgs_0__XlaNumResourceArgs_2_.25")


def _send_args(e: Ev) -> dict:
    return {"from": "IteratorGetNext", "to": "dense/MatMul"} if e.type == "_Send" else {}


def _xprof_kernel(w: Xprof, e: Ev, group: dict) -> None:
    """A GPU kernel on its stream, annotated with its op, and the op on the TensorFlow Ops
    and Name Scope lines over it."""
    w.correlation += 1
    args = group | {"annotation": f"{e.name}:{e.type}", "context_id": "$$1",
                    "correlation_id": str(w.correlation), "is_eager": "0"}
    if e.type == "_XlaRun":
        args |= {"hlo_module": _HLO_MODULE, "hlo_op": e.kernel}
    w.x(1, "Stream #19(Compute)", e.kernel, e.ts, e.dur, args, 19)
    w.x(1, "TensorFlow Ops", e.type, e.ts, e.dur, group | {"long_name": f"{e.name}:{e.type}"},
        Xprof.TF_OPS)
    if "/" in e.name:
        w.x(1, "TensorFlow Name Scope", e.name.split("/", 1)[0], e.ts, e.dur, group,
            Xprof.SCOPES)


def _xprof_copy(w: Xprof, e: Ev, group: dict) -> None:
    to_device = e.type == "MemcpyH2D"
    src, recv = ("IteratorGetNext", "IteratorGetNext/_2:_Recv") if to_device else \
        ("loss/SparseSoftmaxCrossEntropyWithLogits", "loss/_4:_HostRecv")
    dst = "dense/MatMul" if to_device else "loss/Mean"
    w.x(1, f"Stream #{Xprof.STREAMS[e.type]}({e.type})", e.type, e.ts, e.dur,
        group | {"annotation": f"{recv}#from={src},to={dst}#::#edge_name={e.name}#",
                 "context_id": "$$1", "correlation_id": str(w.correlation),
                 "edge_name": e.name, "from": src, "is_eager": "0",
                 "memcpy_details": f"size:{e.nbytes} dest:0 async:1", "to": dst},
        Xprof.STREAMS[e.type])


# --------------------------------------------------------------------------------------------
# single traces for explain

EXPLAIN_CASES = ("first_launch", "host_copy", "empty_device")


@dataclasses.dataclass(frozen=True)
class ExplainParams:
    """One trace for explain. ``setup_us``: first_launch's set-up in the first launches (the
    larger part in RandomStandardNormal's, the rest in MatMul's); ``copy_share``: host_copy's
    host copies as a share of the step (from 0.5: they dominate); ``host_share``:
    empty_device's host ops as a share of the step (under 0.5: the unrecorded device time
    dominates), on ``gpus`` GPU processes."""

    case: str = "first_launch"
    steps: int = 1
    setup_us: float = 400_000.0
    copy_share: float = 0.7
    host_share: float = 0.1
    gpus: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.case not in EXPLAIN_CASES or self.steps < 1 or self.setup_us < 100_000 or \
                not 0.5 <= self.copy_share < 1 or not 0 < self.host_share < 0.5:
            raise ValueError(f"a case that does not dominate (see the docstring): {self}")

    def short(self) -> str:
        return f"{self.case}-{self.steps}step{'s' * (self.steps > 1)}"


@dataclasses.dataclass
class Case:
    """A trace and what explain must lead with (``Verdict.bottleneck``), with the numbers
    planted (µs)."""

    path: Path
    lead: str
    params: ExplainParams
    facts: dict


def explain_case(p: ExplainParams, out: Path) -> Case:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return {"first_launch": _first_launch, "host_copy": _host_copy,
            "empty_device": _empty_device}[p.case](p, out)


def _first_launch(p: ExplainParams, out: Path) -> Case:
    """TF1 on a GPU, the program's only session run: the executor's first launch of
    RandomStandardNormal (cuRAND) and of MatMul (cuBLAS) set their libraries up, hundreds of
    ms, while every kernel takes under 1 ms."""
    rng = np.random.default_rng([p.seed, 11])
    rec, t = Recorder(), EPOCH_US
    rec.op(CPU0, "_SOURCE", "NoOp", t, 4)
    rec.op(GPU0, "_SOURCE", "NoOp", t + 2, 5)
    setup = {"random_normal/RandomStandardNormal": 0.65 * p.setup_us,
             "MatMul": 0.35 * p.setup_us}
    ops = [("random_normal/RandomStandardNormal", "RandomStandardNormal", "curand_normal", 210),
           ("random_normal/mul", "Mul", EIGEN, 35), ("random_normal", "Add", EIGEN, 30),
           ("random_normal_1/RandomStandardNormal", "RandomStandardNormal", "curand_normal", 205),
           ("random_normal_1/mul", "Mul", EIGEN, 34), ("random_normal_1", "Add", EIGEN, 31),
           ("MatMul", "MatMul", "volta_sgemm_128x128_nn", 880), ("Sum", "Sum", "reduce_kernel", 60)]
    host, gpu_free, kernels = t + 12, t + 12, 0.0
    for name, op, kernel, k_us in ops:
        launch = int(setup.get(name, 0) + rng.uniform(8, 14))
        rec.op(GPU0, name, op, int(host), launch, allocator="gpu_bfc",
               outputs=[(FLOAT, (2048, 2048), 2048 * 2048 * 4)])
        start = int(max(gpu_free, host + launch + 4))
        rec.kernel(GPU_SHORT, 14, name, op, kernel, start, k_us)
        gpu_free, host, kernels = start + k_us + 2, host + launch + 3, kernels + k_us
    rec.memcpy(GPU_SHORT, 16, "edge_12_Sum", "DtoH", 4, int(gpu_free + 3), 5)
    rec.op(CPU0, "Sum/_1", "_Recv", int(gpu_free + 12), 6, outputs=[(FLOAT, (), 4)])
    rec.op(CPU0, "_retval_Sum_0_0", "_Retval", int(gpu_free + 21), 3)
    path = out / "timeline.json"
    path.write_text(tf_timeline_modules()[1].Timeline(rec.step_stats())
                    .generate_chrome_trace_format(show_dataflow=True, show_memory=True))
    return Case(path, "one_time", p, {"setup_us": float(p.setup_us),
                                      "kernels_us": float(kernels),
                                      "step_us": float(gpu_free + 24 - t)})


def _host_copy(p: ExplainParams, out: Path) -> Case:
    """TF2 Keras on numpy arrays, on a GPU: each step's batch (features and labels) is sent
    to the GPU by ``_Send`` ops of IteratorGetNext, inside which the host's ``MemcpyH2D``
    calls stage the pageable arrays (``copy_share`` of the step) while each transfer on the
    device takes a fraction of that. A small op that needs no input (the optimizer's step
    counter) opens the device's step, so the copies lie inside the device's step too."""
    base = Params(form="xprof", device="gpu", steps=p.steps, seed=p.seed, change="longer",
                  delta_us=0.0, noise=0.02)
    side = Side(base, "a")
    rest = sum(s.us * side.scale[i] for i, s in enumerate(PROGRAM)) + 400
    copy_us = p.copy_share * rest / (1 - p.copy_share)
    t = 0.0
    for k in range(p.steps):
        first = len(side.ev)
        side.add("launch", "Adam/add", "AddV2", t, LAUNCH, k, thread=1, kernel=EIGEN)
        side.add("kernel", "Adam/add", "AddV2", t + LAUNCH + 5, 3, k, kernel=EIGEN,
                 key="Adam/add")
        host = side._host_op("IteratorGetNext", "IteratorGetNext", t + 6, GET_NEXT, k)
        gpu_free = t
        for j, (edge, frac) in enumerate(((COPY_EDGE, 0.8), ("edge_22_IteratorGetNext", 0.2))):
            us = copy_us * frac
            send = side.add("host", f"IteratorGetNext/_{2 * j + 1}", "_Send", host, us + 40, k,
                            thread=1, key=f"IteratorGetNext/_{2 * j + 1}")
            side.add("host_copy", edge, "MemcpyH2D", host + 15, us, k, thread=1, parent=send,
                     nbytes=int(us * 4000))
            c = side.add("copy", edge, "MemcpyH2D", host + 15 + 0.85 * us, 0.12 * us, k,
                         key=edge, nbytes=int(us * 4000))
            gpu_free, host = side.ev[c].end + 2, side.ev[send].end + GAP
        for op in side.planned(k):
            gpu_free, host = side._kernels(op, k, host, gpu_free)
        side._output_copy(k, gpu_free)
        dev = [e for e in side.ev[first:] if e.row in ("kernel", "copy")]
        side.windows.append((min(e.ts for e in dev), max(e.end for e in dev)))
        t = max(e.end for e in side.ev[first:]) + BETWEEN_STEPS
    path = write_xprof(side, out / "host.trace.json.gz")
    return Case(path, "copy", p, {"host_copies_us": round(float(copy_us), 3),
                                  "step_us": round(step_time(side), 3)})


def _empty_device(p: ExplainParams, out: Path) -> Case:
    """TF2 Keras whose GPU tracer recorded nothing: ``gpus`` GPU processes hold only their
    names (as in ``fatma_prefetch_cpu_tf23``); the host's python thread sits in
    ``train_function`` / ``EagerExecute`` for the whole step, its executor threads run a few
    host ops (``host_share`` of the step)."""
    rng = np.random.default_rng([p.seed, 13])
    w = Xprof(gpu=True)
    w.process(w.host, "/host:CPU")
    for g in range(p.gpus):
        w.process(1 + g, f"/device:GPU:{g}")
    t, step = 0.0, 0.0
    for k in range(p.steps):
        step = 9_000.0 * rng.uniform(0.9, 1.1)
        _python_call(w, t, t + step, {})     # Keras' train_function calls mark the steps
        host, busy = t + 260, 0.0
        for name, op in (("IteratorGetNext", "IteratorGetNext"),
                         ("IteratorGetNext/_1", "_Send"), ("IteratorGetNext/_3", "_Send"),
                         ("Adam/Adam/AssignAddVariableOp", "AssignAddVariableOp")):
            us = p.host_share * step / 4 * rng.uniform(0.8, 1.2)
            w.x(w.host, _compute_thread(0), "ExecutorState::Process", host - 4, us + 8, {})
            w.x(w.host, _compute_thread(0), op, host, us,
                {"is_eager": "0", "long_name": f"{name}:{op}"})
            host, busy = host + us + 0.2 * step / 4, busy + us
        t += step + BETWEEN_STEPS
    path = out / "host.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(w.document()).encode(), mtime=0))
    return Case(path, "no_data", p, {"gpus": p.gpus, "host_ops_us": round(float(busy), 3),
                                     "step_us": round(float(step), 3)})


# --------------------------------------------------------------------------------------------
# the pair

def make_pair(p: Params, out: Path) -> Pair:
    """Write both traces of ``p`` into ``out`` (``a/`` and ``b/``) and return them with the
    truth."""
    sides = {k: Side(p, k).build() for k in ("a", "b")}
    paths = {}
    for k, side in sides.items():
        folder = Path(out) / k
        folder.mkdir(parents=True, exist_ok=True)
        if p.form == "timeline":
            paths[k] = write_timeline(side, folder / "timeline.json")
        else:
            paths[k] = write_xprof(side, folder / "host.trace.json.gz")
    return Pair(paths["a"], paths["b"], truth_of(p, sides["a"], sides["b"]), p)


def main() -> None:
    ap = argparse.ArgumentParser(description="Write one known-answer trace pair; print its "
                                             "truth.")
    for f in dataclasses.fields(Params):
        ap.add_argument(f"--{f.name}", type=type(f.default), default=f.default)
    ap.add_argument("--out", required=True)
    args = vars(ap.parse_args())
    out = Path(args.pop("out"))
    pair = make_pair(Params(**args), out)
    print(json.dumps({"a": str(pair.a), "b": str(pair.b), "truth": pair.truth.summary()},
                     indent=1))


if __name__ == "__main__":
    main()
