"""TensorFlow's op types and trace event names, and what each kind is.

One table per kind of name, read by the loader (event categories), the mapper (stages), the
XLA summary, the verdict, the legend and the sequence alike, so that one trace's op is never
classified two ways. Names are as TF 1.x timelines, TF2 timelines and xprof traces write them.
"""
from __future__ import annotations

import re

from common.hlo import CLUSTER_MODULE, FUNCTION_MODULE  # noqa: F401  (read from there)
from compare.model.events import CAT

# --- XLA -----------------------------------------------------------------------------------

#: Compiles a cluster, or on later calls only looks the executable up in a cache (TF2, TF1 >= 1.12).
XLA_COMPILE_OPS = frozenset({"_XlaCompile"})
#: One op that runs a whole cluster, compiling it first on its first call (TF 1.x; XLA devices).
XLA_LAUNCH_OPS = frozenset({"_XlaLaunch", "XlaLaunch", "XlaLaunchV2"})
#: Ops that run compiled code: the run half of TF2's pair, and the launch ops.
XLA_RUN_OPS = frozenset({"_XlaRun"}) | XLA_LAUNCH_OPS
#: TF 1.x's XLA:GPU runs each kernel under an annotation of this op type, named by the HLO
#: instruction printed whole (``ScopedAnnotation(hlo->ToString(Canonical), "XLA op")``): a
#: timeline shows such kernels on the stream rows, not named after the launch op.
XLA_GPU_KERNEL_OP = "XLA op"
#: Joins the compiled path with TF's fallback path.
XLA_MERGE_OPS = frozenset({"_XlaMerge"})
XLA_OPS = XLA_COMPILE_OPS | XLA_RUN_OPS | XLA_MERGE_OPS

#: What each XLA op is, in words (the seed asked what _XLA_LAUNCH means).
XLA_OP_WORDS = {
    "_XlaLaunch": ("TF 1.x: one op that runs a whole XLA cluster (a group of TF ops XLA "
                   "compiled into one program). Its first call compiles the cluster first, so "
                   "it is long; later calls only run it. First call minus a steady call is "
                   "the compile time."),
    "XlaLaunch": ("the same launch op as _XlaLaunch under the public name later TF 1.x "
                  "releases gave it (both names are TF's own): one op runs a whole compiled "
                  "cluster, compiling it first on its first call."),
    "_XlaCompile": ("TF 1.x from 1.12 on and TF2: the compile half of the old _XlaLaunch. It "
                    "compiles the cluster the first time (or for new input shapes) and "
                    "afterwards only looks the program up in a cache (tens of microseconds)."),
    "_XlaRun": ("the run half: executes the compiled program. Everything inside the cluster "
                "happens inside this one box, so the TF ops it replaced no longer show."),
    "_XlaMerge": ("joins the compiled path with TF's fallback path (used if XLA declines to "
                  "compile); it takes a few microseconds."),
}

#: XLA's compiler at work (xprof TraceMe names): events nested in a compile op or a function
#: call that compiled. A cache lookup shows none of these. Names that start so, or hold
#: :data:`COMPILER_WITHIN` anywhere (:func:`is_compiler_event`).
COMPILER_EVENT_START = re.compile(
    r"HLO passes|XlaCompilationCache::Compile|DeviceCompiler::Compile|"
    r"Compile$|JitCompiler::|FusionCompiler::|Lower\w*Pass$|MlirBridge|ConvertMlir|"
    r"CompileGraph|BuildXlaOps|EncapsulateSubgraphs|MarkForCompilation|XlaJitCompiled|"
    r"IrEmitter|LLVM|OptimizeHloModule|RunHloPasses|RunBackend|ObjectLoader|"
    r"ThunkEmitter")
COMPILER_WITHIN = "Compiler::"


def is_compiler_event(name: str) -> bool:
    """An event of XLA's compiler at work, by its name: one anchored match and one substring
    test (one unanchored pattern tried every alternative at every character of a long
    name)."""
    return COMPILER_WITHIN in name or COMPILER_EVENT_START.match(name) is not None
#: The mark XLA:CPU leaves where a kernel's parallel partition finished (not work).
XLA_KERNEL_END_MARK = "end: "
#: XLA's runtime around compiled kernels (time inside compiled code that cannot be split).
XLA_RUNTIME_PREFIXES = ("CpuExecutable::", "ThunkExecutor::", "Populate ", "end: ",
                        "BlockUntilReady")
#: Events around compiled kernels that are XLA's runtime or a worker thread, not the op that
#: launched the compiled code.
NOT_A_LAUNCH_PREFIXES = XLA_RUNTIME_PREFIXES + ("ThreadpoolListener::",)
#: ``cluster_3`` in a node name ``cluster_3_1/xla_run``.
CLUSTER_OF = re.compile(r"(cluster_\d+)(?:_\d+)?/")
#: XLA:CPU's executable running a module's kernels.
XLA_EXECUTE_PREFIX = "CpuExecutable::"
#: Pseudo-ops XLA puts in a module's metadata for its arguments and results (no TF op).
XLA_ARG_OPS = frozenset({"XLA_Args", "XLA_Retvals"})
#: The TF op of a ``tf.function`` call: ``__inference_<fn>_<N>``.
FUNCTION_OP_PREFIX = "__inference_"


def cluster_of(tf_name: str, fallback: str) -> str:
    """``cluster_3`` from ``cluster_3_1/xla_run``; otherwise the node name itself."""
    m = CLUSTER_OF.match(tf_name or "")
    return m.group(1) if m else (tf_name or fallback)


# --- input: queues, readers, tf.data -------------------------------------------------------

#: The step blocks in these until an input element is there.
INPUT_WAIT_OPS = frozenset({
    "IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional",
    "MultiDeviceIteratorGetNextFromShard",
    "QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueDequeue",
    "QueueDequeueMany", "QueueDequeueUpTo"})
#: TF1 readers: read the next record, first taking a file name from their queue (which may
#: block); in a session's graph they run inside the step.
READER_OPS = frozenset({
    "ReaderReadV2", "ReaderRead", "ReaderReadUpToV2", "ReaderReadUpTo"})
#: xprof's names for the step waiting on an iterator.
INPUT_WAIT_EVENT_PREFIXES = ("IteratorGetNextOp::",)
INPUT_WAIT_EVENT_SUFFIXES = ("IteratorGetNext", "IteratorGetNextSync")
#: Event category "queue": TF1 queue and reader ops.
QUEUE_OP = re.compile(r"^(QueueDequeue|QueueEnqueue|ReaderRead|FIFOQueue|RandomShuffleQueue|"
                      r"PaddingFIFOQueue|QueueClose|QueueSize)")
#: Event category "tf_data": iterator ops and tf.data's own events.
TFDATA_OP = re.compile(r"^(IteratorGetNext|MakeIterator|AnonymousIterator|IteratorV2|"
                       r"Iterator::|OptionalGetValue|MultiDeviceIterator)")
#: tf.data iterators that produce ahead on threads of their own: their event on the consumer's
#: side is a wait for those threads.
TFDATA_ASYNC_KINDS = frozenset({
    "Prefetch", "ParallelMap", "ParallelInterleave", "ParallelBatch", "MapAndBatch",
    "DataService", "ParallelFilter", "LegacyParallelInterleave", "ParallelMapV2"})
#: A tf.data service client's fetch of an element from a worker (on tf.data's own threads,
#: ahead of the step, like a prefetch): what the client does while the workers run the
#: pipeline's first part. With ``Iterator::DataService`` it shows that a trace's input came
#: from tf.data service workers.
DATA_SERVICE_FETCH_EVENTS = frozenset({"GetDataServiceElement"})
DATA_SERVICE_ITERATOR_KIND = "DataService"
#: tf.data iterator kinds that are one pipeline stage's work.
TFDATA_KIND_STAGE = {"Shuffle": "shuffle", "ShuffleAndRepeat": "shuffle", "Batch": "assemble",
                     "PaddedBatch": "assemble", "TensorSlices": "read", "TFRecord": "read",
                     "TextLine": "read", "FixedLengthRecord": "read", "ListFiles": "read",
                     "MatchingFiles": "read"}


def tfdata_kind(name: str) -> str:
    """``Prefetch`` from a tf.data iterator's event ``Iterator::Prefetch`` (or its path
    ``Iterator::Model::...::ParallelMapV2``, version suffix dropped); "" for other names."""
    if not name.startswith(TFDATA_ITERATOR_PREFIX):
        return ""
    return re.sub(r"V\d+$", "", name.rsplit("::", 1)[-1].split("[", 1)[0])


def is_data_service(name: str) -> bool:
    """An event of a tf.data service client: an element fetched from a worker, or the
    ``DataService`` iterator that hands them to the pipeline."""
    return name in DATA_SERVICE_FETCH_EVENTS or tfdata_kind(name) == DATA_SERVICE_ITERATOR_KIND


def is_tfdata_async(name: str) -> bool:
    """A tf.data iterator that produces ahead on threads of its own (its event on the
    consumer's side is a wait for them)."""
    kind = tfdata_kind(name)
    return bool(kind) and (kind in TFDATA_ASYNC_KINDS or
                           name.rsplit("::", 1)[-1] in TFDATA_ASYNC_KINDS)


def is_input_wait(op_type: str, name: str = "") -> bool:
    """The step waiting for an input element (an iterator or a queue dequeue)."""
    return (op_type in INPUT_WAIT_OPS or name in INPUT_WAIT_OPS
            or name.endswith(INPUT_WAIT_EVENT_SUFFIXES)
            or name.startswith(INPUT_WAIT_EVENT_PREFIXES))


def is_get_next(op_or_name: str) -> bool:
    """An iterator's ``GetNext`` (tf.data), whose total time tells whether input was ready."""
    return op_or_name.startswith("IteratorGetNext")


def reads_input(ops: list[str]) -> bool:
    """Some of ``ops`` read input (TF1 readers) rather than only wait for it."""
    return any(op in READER_OPS for op in ops)


def is_input_op(op_type: str, name: str = "") -> bool:
    """Input the step itself waits for or reads: a wait (see :func:`is_input_wait`) or a TF1
    reader's read inside the step."""
    return is_input_wait(op_type, name) or op_type in READER_OPS or name in READER_OPS


# --- TF's runtime ----------------------------------------------------------------------------

#: Graph plumbing and control flow: executor work that computes nothing of a pipeline.
GRAPH_PLUMBING_OPS = frozenset({
    "_XlaMerge", "Switch", "Merge", "Identity", "IdentityN", "NoOp", "Const", "_Retval",
    "_Arg", "_Send", "_Recv", "_HostSend", "_HostRecv", "Enter", "Exit", "NextIteration",
    "LoopCond", "ControlTrigger", "PartitionedCall", "StatefulPartitionedCall",
    "MakeIterator", "AnonymousIteratorV3", "AnonymousIteratorV2", "DeleteIterator",
    "OptionalGetValue", "OptionalHasValue"})
#: Grappler's remapper fuses an op with the ones that follow it into one kernel
#: (``_FusedConv2D`` = Conv2D + BiasAdd + Relu, ``_FusedMatMul``, ``_FusedBatchNormEx``, oneDNN's
#: ``_MklFusedConv2D``...), named after the last op it absorbed.
FUSED_OP = re.compile(r"^_(?:Mkl)?(?:Native)?Fused[A-Z]")
#: Constants: an op whose inputs are all constants computes the same result in every run...
CONST_OPS = frozenset({"Const", "HostConst"})
#: ... unless it draws random numbers (TF's stateful random ops, tensorflow/core/ops/
#: random_ops.cc and stateful_random_ops.cc: a new draw each run from constant shapes).
STATEFUL_RANDOM_OP = re.compile(r"^(?:Random(?:StandardNormal|Uniform|UniformInt|Gamma|"
                                r"Poisson|PoissonV2|Shuffle|Crop)|TruncatedNormal|Multinomial|"
                                r"ParameterizedTruncatedNormal|StatefulUniform\w*|"
                                r"StatefulStandardNormal\w*|StatefulTruncatedNormal|"
                                r"StatefulRandomBinomial|NonDeterministicInts)$")
#: Ops that compute nothing: their time in a trace is the executor's (a run's ``_SOURCE``).
NO_WORK_OPS = frozenset({"NoOp"})
SEND_OPS = frozenset({"_Send", "_HostSend"})
RECV_OPS = frozenset({"_Recv", "_HostRecv"})
#: The ``/_N`` suffix TF gives a Send/Recv pair it inserts between devices.
SEND_RECV_SUFFIX = re.compile(r"/_\d+$")
#: A GPU copy's node name in a timeline: ``edge_<N>_<tensor>``.
COPY_EDGE = re.compile(r"^edge_\d+_(.+)$")
#: Executor, eager-dispatch and thread-pool TraceMe names (exact) of category "runtime".
RUNTIME_EVENTS = frozenset({
    "ExecutorState::Process", "SessionRun", "ThreadpoolListener::Region",
    "ExecutorDoneCallback", "ParallelFor", "ExecutorState::ProcessAsync::Start",
    "ExecutorState::ProcessAsync::Done", "EagerExecute", "EagerLocalExecute", "FunctionRun",
    "EagerKernelExecute", "ExecutorState::Process::Process"})
#: XLA runtime event names (exact) of category "runtime".
XLA_RUNTIME_EVENTS = frozenset({
    "CpuExecutable::ExecuteAsyncOnStream", "ThunkExecutor::Execute", "BlockUntilReady",
    "CpuExecutable::Execute", "XlaCompileOnDemandOp::Compute"})
#: Prefixes of TF runtime events: executor, eager dispatch, XLA's runtime, allocators.
RUNTIME_PREFIXES = (
    "ExecutorState::", "ThreadpoolListener::", "SessionRun", "ExecutorDoneCallback",
    "ParallelFor", "EagerExecute", "EagerLocalExecute", "EagerKernelExecute", "FunctionRun",
    "TFE_", "KernelAndDeviceFunc::", "EagerCopyToDevice", "ValidateInputTypeAndPlacement",
    "InstantiatedCapturedFunction::", "CpuExecutable::", "ThunkExecutor::", "Populate ",
    "end: ", "BlockUntilReady", "XlaCompileOnDemandOp", "PjRt", "ProcessFunctionLibraryRuntime",
    "FunctionLibraryRuntime", "MemoryAllocation", "Allocate",
    "ParallelInterleaveDatasetOp", "ParallelMapDatasetOp", "PrefetchDatasetOp",
    "tf_data", "BFCAllocator", "EagerContext", "CallFrame", "ExecuteAsync")
#: A thread inside these is blocked on other threads, not working: a session waiting for its
#: executor, a caller waiting for a function's ops (which run on other threads or nest inside).
WAIT_EVENT_PREFIXES = ("SessionRun", "BlockUntilReady", "FunctionRun", "KernelAndDeviceFunc::Run")
#: Calls a program's own thread makes into TensorFlow (a TF1 ``session.run``, the Python
#: binding's eager execute): the thread that makes them runs the program's Python, whatever its
#: name (a main thread is named after the executable: ``python3``, or ``pytest``, ``train``...).
PROGRAM_CALL_EVENTS = frozenset({"SessionRun", "TFE_Py_Execute", "TFE_Py_ExecuteCancelable",
                                 "train_function"})
#: The eager execution of a ``tf.function`` (``EagerLocalExecute: __inference_train_function_967``)
#: on the calling thread, and the kernel execution inside it: the caller runs the function's
#: executor and then blocks until its ops, which run on the inter-op threads, are done, so an
#: ``EagerKernelExecute`` inside a function call with nothing nested is that thread waiting
#: (TF 2.2/2.3 record no ``KernelAndDeviceFunc::Run`` around the wait).
FUNCTION_CALL_EVENT = re.compile(r"^Eager(?:Local)?Execute: __inference_")
FUNCTION_KERNEL_EXECUTE = "EagerKernelExecute"
#: CUDA calls in which a host thread waits for the GPU to finish queued work.
CUDA_SYNC_PREFIXES = ("cuStreamSynchronize", "cudaStreamSynchronize", "cuCtxSynchronize",
                      "cudaDeviceSynchronize", "cuEventSynchronize", "cudaEventSynchronize")
#: tf.data building an iterator (once per epoch).
MAKE_ITERATOR_PREFIX = "MakeIterator::"
TFDATA_ITERATOR_PREFIX = "Iterator::"
#: An Eigen worker's region: shards of whatever op runs elsewhere when nothing nests inside.
WORKER_REGION = "ThreadpoolListener::Region"
#: The node every TF executor runs first in a session run (timelines mark runs with it).
SOURCE_NODE = "_SOURCE"


def category_of(name: str, op_type: str, hlo_op: str, step_marker: bool) -> int:
    """The loader's event category (index into ``CATEGORIES``), from names alone."""
    if step_marker:
        return CAT["step"]
    t = op_type or name
    if t in XLA_COMPILE_OPS:
        return CAT["xla_compile"]
    if t in XLA_RUN_OPS:
        return CAT["xla_run"]
    if hlo_op:
        return CAT["xla_kernel"]
    if TFDATA_OP.match(t) or name.startswith(TFDATA_ITERATOR_PREFIX):
        return CAT["tf_data"]
    if QUEUE_OP.match(t):
        return CAT["queue"]
    if t in XLA_MERGE_OPS or name in XLA_RUNTIME_EVENTS or name.startswith(("Populate ",
                                                                            "end: ")):
        return CAT["runtime"]
    if name in RUNTIME_EVENTS or name.startswith(("ExecutorState::", "ThreadpoolListener::")):
        return CAT["runtime"]
    if name.startswith("$"):
        return CAT["python"]
    if op_type:
        return CAT["op"]
    return CAT["other"]


# --- GPU kernels ---------------------------------------------------------------------------

#: Args in which the TF profiler names the TF op (``node/name:OpType``) that launched a GPU
#: kernel or copy, newest first: ``tf_op`` (xprof), ``level 0`` (the outermost annotation,
#: TF 2.2-2.4), ``annotation`` (``name:Type#shape=...#``, nested ones joined by ``::``).
KERNEL_OP_ARGS = ("tf_op", "level 0", "annotation")
#: The GPU tracer's records carry this arg: on a device a kernel or copy, on a host thread the
#: CUDA call that launched it (``cuLaunchKernel`` named after the kernel, a copy, a sync).
CUDA_CALL_ARG = "correlation_id"
#: The GPU tracer's copies and memsets (TF1 ``MEMCPYHtoD``, xprof ``MemcpyH2D``, ``Memset``,
#: the CUDA calls behind them); a copy names the op that needed it in the same args as a
#: kernel does, and stays a copy, not that op.
COPY_NAME = re.compile(r"^(?:MEMCPY|Memcpy|memcpy|cuMemcpy|cudaMemcpy|Memset|MEMSET)")


#: xprof's ``long_name`` of an op: ``node/name:OpType``. TF node names hold no ':' and op types
#: are identifiers, so a name with ``::`` (a tf.data iterator's path,
#: ``Iterator::Model::MaxIntraOpParallelism::Prefetch``, or a C++ scope) is not one.
NODE_AND_TYPE = re.compile(r"^([^:]+):([A-Za-z_][\w>]*)$")


def node_and_type(long_name: str) -> tuple[str, str] | None:
    """(node name, op type) of an xprof ``long_name`` written ``node:Type``, else None."""
    m = NODE_AND_TYPE.match(long_name)
    return (m.group(1), m.group(2)) if m else None


#: Which way a GPU copy went, from its name (``MEMCPYHtoD``, ``MemcpyH2D``, ``MemcpyP2P``...).
COPY_DIRECTIONS = ((re.compile(r"HtoD|H2D"), "host to device"),
                   (re.compile(r"DtoH|D2H"), "device to host"),
                   (re.compile(r"DtoD|D2D|P2P|PtoP"), "device to device"),
                   (re.compile(r"(?i)memset"), "memset"))


def copy_direction(name: str) -> str:
    """``host to device``, ``device to host``, ``device to device``, ``memset`` or ""."""
    return next((words for pat, words in COPY_DIRECTIONS if pat.search(name)), "")


def kernel_op(args: dict, name: str) -> tuple[str, str]:
    """(node name, op type) of the TF op a GPU kernel ran for, from its args; ("", "") when
    the args name none or the event is a copy."""
    if COPY_NAME.match(name):
        return "", ""
    for key in KERNEL_OP_ARGS:
        v = args.get(key)
        if isinstance(v, str) and v:
            v = v.split("::", 1)[0].split("#", 1)[0]
            node, _, op_type = v.rpartition(":")
            if node and op_type and " " not in op_type:
                return node, op_type
    return "", ""


# --- tensors: shapes and precision --------------------------------------------------------

#: The TF profiler's allocation events on host planes (TF 2.4 on): the op that allocated
#: (``tf_op``), the tensor's ``data_type`` (a ``DataType`` enum value), its ``shape``
#: (``[64,12,8,8]``) and ``region_type`` (``output`` for an op's result, ``temp``...).
MEMORY_ALLOCATION_EVENT = "MemoryAllocation"
ALLOCATION_OUTPUT = "output"
#: ``DataType`` enum values (tensorflow/core/framework/types.proto) by name; the half ones.
DTYPE_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 7: "string", 9: "int64",
               10: "bool", 14: "bfloat16", 19: "float16"}
HALF_DTYPES = frozenset({"float16", "bfloat16"})
#: TF1 timelines with memory (``show_memory``): a tensor snapshot's description, a text
#: proto (``dtype: DT_FLOAT shape { dim { size: 32 } ... }``).
TENSOR_DTYPE = re.compile(r"dtype:\s*DT_(\w+)")
TENSOR_DIM = re.compile(r"dim\s*\{\s*size:\s*(-?\d+)")
#: Mixed precision in a graph: Keras' dynamic loss scaling checks every gradient is finite
#: (``IsFinite`` reduced by ``All``), and each layer casts its variables (``Cast``);
#: Grappler's auto mixed precision names the casts it inserts.
LOSS_SCALE_OPS = frozenset({"IsFinite"})
CAST_OPS = frozenset({"Cast"})
AUTO_MIXED_PRECISION = re.compile(r"AutoMixedPrecision|CastToFp16|CastToBf16|mixed_float16|"
                                  r"mixed_bfloat16|LossScaleOptimizer")

# --- step marks ------------------------------------------------------------------------------

#: Keras' TraceMe around each call of its training function (TF 2.2 on), and the eager
#: execution of that function: one per training step.
TRAIN_FUNCTION = re.compile(r"^(train_function|(Eager\w*Execute: )?__inference_train_function_\d+)$")
#: ``ProfilerStep#N``: a profiler step annotation numbered N.
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
#: The xprof device line that holds one event per step (xprof's own step rows).
STEPS_LINE = "Steps"
#: One-time work in a first step: ops that create an input pipeline or iterator (once per
#: pipeline), and the node every executor runs first (long only while a device is set up).
ITERATOR_CREATION_OPS = frozenset({
    "OneShotIterator", "MakeIterator", "IteratorV2", "Iterator", "AnonymousIterator",
    "AnonymousIteratorV2", "AnonymousIteratorV3", "MultiDeviceIterator",
    "MultiDeviceIteratorInit", "IteratorFromStringHandleV2"})
#: xprof host threads that launch one GPU's kernels (TF's private GPU threads).
GPU_LAUNCH_THREADS = ("tf_gpu_private",)
