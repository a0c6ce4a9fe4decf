"""The second view: what any TensorFlow program's time is spent on, from TF's own names.

The seed's stages (:mod:`compare.vocabulary.labels`) name the seed pipeline's work. Any other
program — a model trained from ``feed_dict``, a Keras ``fit``, a multi-GPU tower — is described
by these groups instead: its input, its preprocessing, its own compute grouped by the program's
top-level name scopes, optimizer updates, communication, copies, XLA, TF's runtime and idle
time. Every table here is named by how TensorFlow names things (op types in
``tensorflow/core/ops``, the scopes ``tf.train.Optimizer`` and Keras open), not by any trace.
"""
from __future__ import annotations

import re

from compare.vocabulary.ops import (
    COPY_NAME,
    GRAPH_PLUMBING_OPS,
    INPUT_WAIT_OPS,
    QUEUE_OP,
    READER_OPS,
    RECV_OPS,
    SEND_OPS,
    TFDATA_OP,
    XLA_COMPILE_OPS,
    XLA_RUN_OPS,
)

#: The groups, in display order; index 0 is unmapped. ``compute`` rows are shown per scope.
GROUPS: tuple[str, ...] = ("unmapped", "input", "preprocessing", "compute", "optimizer",
                           "communication", "copy", "xla_compile", "xla_run", "runtime", "idle")
GROUP = {name: i for i, name in enumerate(GROUPS)}
GROUP_WORDS = {
    "input": "reading, queueing, tf.data and fed tensors; waiting for them",
    "preprocessing": "decoding, parsing, string and image ops",
    "compute": "the program's own ops (its model), by top-level name scope",
    "optimizer": "optimizer updates (Apply*/ResourceApply*, update_* scopes)",
    "communication": "NCCL, collectives, Send/Recv between devices",
    "copy": "host<->device memory copies",
    "xla_compile": "XLA compiling",
    "xla_run": "compiled XLA code the trace cannot split by op",
    "runtime": "TF's executor, dispatch, Python, variables and graph plumbing",
    "idle": "nothing traced",
    "unmapped": "no rule of either view places it",
}

#: The step split (report.md's one line per side): the groups, coarser. Time nothing traced
#: runs (``idle``, ``untraced`` at a step window's edges) is idle.
SPLIT_KEYS = ("input", "compute", "copy", "communication", "compile", "runtime", "idle")
GROUP_SPLIT: dict[str, str] = {
    "input": "input", "preprocessing": "compute", "compute": "compute", "optimizer": "compute",
    "xla_run": "compute", "unmapped": "compute", "copy": "copy",
    "communication": "communication", "xla_compile": "compile", "runtime": "runtime",
    "idle": "idle", "untraced": "idle"}

#: The seed's stages as groups: reading, batching and shuffling are input work.
STAGE_GROUP: dict[str, str] = {
    "read": "input", "assemble": "input", "shuffle": "input", "input_wait": "input",
    "decode": "preprocessing", "resize": "preprocessing", "crop": "preprocessing",
    "flip": "preprocessing", "brightness": "preprocessing", "saturation": "preprocessing",
    "contrast": "preprocessing", "clip": "preprocessing",
    "xla_compile": "xla_compile", "xla_run": "xla_run", "runtime": "runtime", "idle": "idle",
}

# --- optimizer -------------------------------------------------------------------------------
#: Every optimizer kernel: ApplyAdam, ResourceApplyAdam, SparseApplyAdagrad,
#: ResourceSparseApplyFtrl, ApplyGradientDescent, ... (tensorflow/core/ops/training_ops.cc).
OPTIMIZER_OP = re.compile(r"^(?:Resource)?(?:Sparse)?Apply[A-Z]")
#: ``Optimizer.apply_gradients`` opens ``update_<variable>`` per variable (TF1; Keras
#: ``update_N``) inside a scope named for the optimizer.
UPDATE_SCOPE = re.compile(r"^update(?:_|$)")
#: The scope names optimizers give their updates (their ``name`` defaults).
OPTIMIZER_SCOPES = frozenset({
    "GradientDescent", "SGD", "Adam", "AdamW", "Adamax", "Nadam", "Adagrad", "AdagradDA",
    "Adadelta", "RMSProp", "RMSprop", "Momentum", "Ftrl", "ProximalAdagrad",
    "ProximalGradientDescent", "LAMB", "Lion", "Adafactor"})

# --- communication ---------------------------------------------------------------------------
#: NCCL (tf.contrib.nccl / nccl_ops), collectives (CollectiveReduce..., V2/V3), and XLA's
#: collective HLO ops on devices.
COMMUNICATION_OP = re.compile(
    r"^(?:_?Nccl|Collective|AllReduce|AllGather|ReduceScatter|AllToAll|CollectivePermute|"
    r"all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|nccl)")


def is_collective(op_type: str, name: str = "") -> bool:
    """A collective op or kernel (NCCL, all-reduce...; not a Send/Recv), by op type or event
    name (a GPU kernel's name, ``ncclAllReduceRingLLKernel_sum_f32``)."""
    return bool(COMMUNICATION_OP.match(op_type) or (name and COMMUNICATION_OP.match(name)))


COMMUNICATION_OPS = SEND_OPS | RECV_OPS | frozenset({"Send", "Recv", "RecvTensor"})

# --- copies ----------------------------------------------------------------------------------
#: TF's copy kernels (the GPU tracer's copies: ``ops.COPY_NAME``).
COPY_OPS = frozenset({"_CopyFromGpuToHost", "_CopyFromHostToGpu", "CopyToMesh"})

# --- input -----------------------------------------------------------------------------------
#: tf.data's dataset and iterator ops (``TFRecordDataset``, ``MapDataset``, ``ModelDataset``...).
DATASET_OP = re.compile(r"(?:Dataset|DatasetV\d)$|^(?:Experimental|Anonymous)?\w*Iterator")
#: TF1 readers being made (the read ops are :data:`READER_OPS`).
READER_MAKE_OP = re.compile(r"^\w*Reader(?:V\d)?$")
#: A session's fed tensors: ``Placeholder`` nodes become ``_Arg`` (``_arg_<name>_0_0``) or, in
#: older TF, ``_Recv`` (``_recv_<name>_0``) when fed by ``feed_dict``.
FEED_NODE = re.compile(r"^_(?:arg|recv)_")
FEED_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
#: A fetched value handed back to the client (``_retval_<name>_0_0``, ``_send_<name>_0``).
FETCH_NODE = re.compile(r"^_(?:retval|send)_")
INPUT_OPS = INPUT_WAIT_OPS | READER_OPS | frozenset({
    "MakeIterator", "DeleteIterator", "OptionalGetValue", "OptionalHasValue",
    "IteratorToStringHandle", "IteratorFromStringHandle", "IteratorFromStringHandleV2",
    "MultiDeviceIteratorInit", "DeleteMultiDeviceIterator"})

# --- preprocessing ---------------------------------------------------------------------------
#: Decoding, parsing, strings, lookups and images (tensorflow/core/ops/{parsing,string,image,
#: lookup}_ops.cc). Gradients of image ops (``ResizeBilinearGrad``) belong to the model.
PREPROCESS_OP = re.compile(
    r"^(?:Decode|Parse|String|Unicode|Regex|StaticRegex|LookupTable|HashTable|Encode(?:Jpeg|Png|"
    r"Base64|Proto|Wav)|Resize|Adjust|CropAndResize|SampleDistortedBoundingBox|"
    r"DrawBoundingBoxes|ExtractJpegShape|Substr|AsString|ReduceJoin|RGBToHSV|HSVToRGB|"
    r"ScaleAndTranslate|ReadFile|MatchingFiles|WriteFile|Tokenize)")
GRADIENT_OP_SUFFIX = "Grad"

# --- runtime ---------------------------------------------------------------------------------
#: Variables and reading them: bookkeeping, not compute.
VARIABLE_OPS = frozenset({
    "VariableV2", "Variable", "VarHandleOp", "ReadVariableOp", "VarIsInitializedOp",
    "TemporaryVariable", "DestroyTemporaryVariable", "IsVariableInitialized", "RefIdentity",
    "RefSwitch", "RefMerge", "RefEnter", "RefExit", "RefNextIteration"})
#: Plumbing that stays runtime in this view (Send/Recv and iterator plumbing are not).
RUNTIME_OPS = (GRAPH_PLUMBING_OPS - COMMUNICATION_OPS - INPUT_OPS) | VARIABLE_OPS | frozenset({
    "Snapshot", "StopGradient", "PreventGradient", "Assert", "Print", "PrintV2", "NoOp"})
#: CUDA driver and runtime API calls on host threads (the host side of GPU work).
CUDA_API = re.compile(r"^(?:cu[A-Z]|cuda[A-Z]|cudnn|cublas|cupti|nccl[A-Z]|hip[A-Z]|Cuda)")

XLA_OPS_GROUPS = {**{t: "xla_compile" for t in XLA_COMPILE_OPS},
                  **{t: "xla_run" for t in XLA_RUN_OPS}}

# --- scopes ----------------------------------------------------------------------------------
#: Prefixes that are not the program's own scopes: XLA clusters (``cluster_3_1/``), function
#: calls (``StatefulPartitionedCall/``, ``__inference_train_function_123/``), a Keras model's
#: gradient tape wrapper is kept (``gradient_tape`` is the program's backward pass).
WRAPPER_SCOPE = re.compile(
    r"^(?:cluster_\d+(?:_\d+)?|(?:Stateful)?PartitionedCall(?:_\d+)?|__inference_\w+|"
    r"__forward_\w+|__backward_\w+|inference_\w+_\d+|while(?:_\d+)?/body|"
    r"(?:Stateful)?PartitionedCall)$")
#: The label of a node with no scope of its own.
TOP_LEVEL = "(top level)"


def strip_wrappers(tf_name: str) -> str:
    """``conv1/Conv2D`` from ``StatefulPartitionedCall/cluster_2_1/conv1/Conv2D``."""
    parts = tf_name.split("/")
    k = 0
    while k < len(parts) - 1 and WRAPPER_SCOPE.match(parts[k]):
        k += 1
    return "/".join(parts[k:])


def top_scope(tf_name: str) -> str:
    """The program's top-level name scope of a node (``layer_1`` of ``layer_1/MatMul``), or
    :data:`TOP_LEVEL` for a node with none."""
    name = strip_wrappers(tf_name)
    return name.split("/", 1)[0] if "/" in name else TOP_LEVEL


#: The backward pass's scopes: ``tf.gradients`` (``gradients/``, ``gradients_1/``) and
#: Keras/TF2's ``gradient_tape/``.
GRADIENT_SCOPE = re.compile(r"^(?:gradients(?:_\d+)?|gradient_tape)$")


def is_model_side(tf_name: str) -> bool:
    """The node sits under a backward-pass or optimizer scope: it is the model's or the
    optimizer's work, whatever its op type (a ``StridedSlice`` under ``Adam/update_w/``)."""
    parts = strip_wrappers(tf_name).split("/")[:-1]
    return any(GRADIENT_SCOPE.match(p) or UPDATE_SCOPE.match(p) for p in parts) or \
        bool(parts) and parts[0] in OPTIMIZER_SCOPES


def is_optimizer(op_type: str, tf_name: str) -> bool:
    """An optimizer update: an ``Apply*`` kernel, or any op under an ``update_*`` scope or an
    optimizer's own top-level scope (``Adam/``, ``GradientDescent/``)."""
    if OPTIMIZER_OP.match(op_type or ""):
        return True
    parts = strip_wrappers(tf_name).split("/")[:-1]
    return bool(parts) and (parts[0] in OPTIMIZER_SCOPES or any(UPDATE_SCOPE.match(p)
                                                                for p in parts))


def group_of_op(op_type: str, tf_name: str, name: str = "") -> str | None:
    """The group of one TF op (or named event) from its type and node name, or None when the
    names say nothing (then the caller's context decides)."""
    t = op_type or ""
    node = tf_name or ""
    if t in XLA_OPS_GROUPS:
        return XLA_OPS_GROUPS[t]
    if COPY_NAME.match(name) or COPY_NAME.match(t) or t in COPY_OPS:
        return "copy"
    if t in COMMUNICATION_OPS or COMMUNICATION_OP.match(t) or COMMUNICATION_OP.match(name):
        # a session's feeds arrive as _Recv/_Arg nodes named _recv_<tensor>
        return "input" if FEED_NODE.match(node) else "communication"
    if FEED_NODE.match(node) or t in FEED_OPS:
        return "input"
    if t in INPUT_OPS or QUEUE_OP.match(t) or TFDATA_OP.match(t) or TFDATA_OP.match(name) \
            or (t and DATASET_OP.search(t)) or READER_MAKE_OP.match(t):
        return "input"
    if is_optimizer(t, node):
        return "optimizer"
    if FETCH_NODE.match(node) or t in RUNTIME_OPS:
        return "runtime"
    if t and PREPROCESS_OP.match(t) and not t.endswith(GRADIENT_OP_SUFFIX):
        return "preprocessing"
    if CUDA_API.match(name):
        return "runtime"
    return "compute" if t else None

#: What the worker time no op runs beside is called among the runtime row's events
#: (compare.analysis.account books it there).
IDLE_WORKERS = "(worker-thread regions with no op traced in or beside them)"
