"""The labels an event can get: the seed pipeline's stages, the overhead categories, and the
rule (basis) that found each label, with the TensorFlow names that point at each stage.

Label index 0 is ``unmapped``; :data:`LABELS` orders every other label as
:data:`common.stages.ALL_STAGES` does (pipeline stages, then overheads).
"""
from __future__ import annotations

import re

from common.stages import ALL_STAGES, PIPELINE_STAGES
from compare.vocabulary.ops import (
                                    GRAPH_PLUMBING_OPS,
                                    INPUT_WAIT_OPS,
                                    READER_OPS,
                                    XLA_COMPILE_OPS,
                                    XLA_RUN_OPS,
)

LABELS: tuple[str, ...] = ("unmapped",) + ALL_STAGES
LABEL = {name: i for i, name in enumerate(LABELS)}
UNMAPPED = 0
PIPELINE = frozenset(LABEL[s] for s in PIPELINE_STAGES)
#: The colour jitters and their clip: a Minimum/Maximum fed by one of them is a clip.
JITTER = frozenset(LABEL[s] for s in ("brightness", "saturation", "contrast", "clip"))

#: How an event's label was found; the ones in :data:`ESTIMATES` are estimates.
BASES: tuple[str, ...] = ("unmapped", "scope", "api_scope", "op_type", "dataflow", "hlo",
                          "hlo_split", "cluster_members", "cluster_profile", "inherited",
                          "concurrent_op", "runtime", "tf_data", "lane")
BASIS = {name: i for i, name in enumerate(BASES)}
ESTIMATES: dict[str, str] = {
    "hlo_split": "a fused XLA kernel's time split among the stages fused into it, in proportion "
                 "to the output elements of its HLO instructions per stage",
    "cluster_members": "a timeline's _XlaRun given to the one stage all the cluster's TF ops "
                       "belong to (the timeline does not show what ran inside)",
    "cluster_profile": "a timeline's _XlaRun split among stages in the proportions the profile "
                       "of the same run measured for that cluster's kernels",
    "concurrent_op": "an Eigen worker's time given to the ops running on other threads at that "
                     "moment (intra-op shards carry no op name)",
}

#: Op types that are one label's work wherever they appear.
OP_TYPES: dict[str, frozenset[str]] = {
    "read": READER_OPS | {"ReadFile", "WholeFileReader", "WholeFileReaderV2",
                          "TFRecordReaderV2", "TextLineReaderV2", "FixedLengthRecordReaderV2",
                          "MatchingFiles"},
    "decode": frozenset({"DecodeJpeg", "DecodeAndCropJpeg", "DecodeImage", "DecodePng",
                         "DecodeBmp", "DecodeGif", "DecodeWebP", "ExtractJpegShape"}),
    "resize": frozenset({"ResizeBilinear", "ResizeBicubic", "ResizeArea",
                         "ResizeNearestNeighbor", "ScaleAndTranslate"}),
    "crop": frozenset({"Slice", "StridedSlice", "RandomCrop", "StatelessRandomUniformInt",
                       "StatelessRandomUniformIntV2", "RandomUniformInt", "CropAndResize"}),
    "flip": frozenset({"ReverseV2", "Reverse"}),
    "saturation": frozenset({"AdjustSaturation", "RGBToHSV", "HSVToRGB"}),
    "contrast": frozenset({"AdjustContrastv2", "AdjustContrast"}),
    "clip": frozenset({"ClipByValue"}),
    "assemble": frozenset({"Pack", "ConcatV2", "Concat"}),
    "shuffle": frozenset({"RandomShuffle", "StatelessShuffle"}),
    "input_wait": INPUT_WAIT_OPS,
    "xla_compile": XLA_COMPILE_OPS,
    "xla_run": XLA_RUN_OPS,
    "runtime": GRAPH_PLUMBING_OPS,
}
OP_TYPE_LABEL: dict[str, str] = {t: s for s, types in OP_TYPES.items() for t in types}
#: Op types of :data:`OP_TYPES` that any program uses (slicing, stacking, concatenating,
#: reversing, clipping, shuffling, integer draws): they are a pipeline stage's work only in a
#: trace that shows an image pipeline, on a node with no scope that is not the pipeline's.
GENERIC_OP_TYPES = frozenset({
    "Slice", "StridedSlice", "StatelessRandomUniformInt", "StatelessRandomUniformIntV2",
    "RandomUniformInt", "ReverseV2", "Reverse", "ClipByValue", "Pack", "ConcatV2", "Concat",
    "RandomShuffle", "StatelessShuffle"}) | OP_TYPES["read"]
#: Op types whose label no name scope can change (overheads that are what they are).
FIXED_OP_TYPES = XLA_COMPILE_OPS | XLA_RUN_OPS | INPUT_WAIT_OPS

#: TensorFlow's own name scopes (tf.image, tf.compat.v1.train...), as a user's graph has them.
API_SCOPES: dict[str, str] = {
    "read_file": "read", "input_producer": "read", "string_input_producer": "read",
    "ReaderReadV2": "read",
    "decode_jpeg": "decode", "decode_image": "decode", "decode_png": "decode",
    "resize": "resize", "resize_images": "resize", "resize_bilinear": "resize",
    "resize_image": "resize", "resize_image_with_pad": "resize",
    "random_crop": "crop", "crop_to_bounding_box": "crop", "central_crop": "crop",
    "stateless_random_crop": "crop",
    "flip_left_right": "flip", "random_flip_left_right": "flip", "flip_up_down": "flip",
    "random_flip_up_down": "flip", "stateless_random_flip_left_right": "flip",
    "adjust_brightness": "brightness", "random_brightness": "brightness",
    "stateless_random_brightness": "brightness",
    "adjust_saturation": "saturation", "random_saturation": "saturation",
    "stateless_random_saturation": "saturation",
    "adjust_contrast": "contrast", "random_contrast": "contrast",
    "stateless_random_contrast": "contrast",
    # convert_image_dtype: the seed (and both our pipelines) do it inside the resize step
    "convert_image": "resize",
    "clip_by_value": "clip",
    "random_shuffle": "shuffle",
}
#: TF API scopes any program opens (gradient clipping, shuffling, reading files): like
#: :data:`GENERIC_OP_TYPES`, a stage's evidence only in a trace that shows an image pipeline.
GENERIC_API_SCOPES = frozenset({"clip_by_value", "random_shuffle", "read_file", "input_producer",
                                "string_input_producer", "ReaderReadV2"})
#: TF's uniquifying suffix of a scope (``clip_by_value_1``).
SCOPE_SUFFIX = re.compile(r"_\d+$")
#: TF names a gradient's scope after its op, suffix included (``MatMul_3_grad``).
GRAD_SCOPE_SUFFIX = re.compile(r"_\d+(?=_grad$)")
#: Grappler renames ops it rewrites ("ArithmeticOptimizer/AddOpsRewrite_adjust_brightness"):
#: the original scope survives after these prefixes.
GRAPPLER_REWRITE = re.compile(r"^(?:AddOpsRewrite_(?:Leaf_\d+_)?|[A-Za-z]+Optimizer_)")
#: Dataflow rules of timelines: a Minimum/Maximum fed by a jitter is its clip; a gather fed by
#: a shuffle is the shuffle.
CLIP_OPS = frozenset({"Minimum", "Maximum"})
GATHER_OPS = frozenset({"GatherV2", "Gather", "ResourceGather"})
#: Thread names whose work is one label: a TF1 reader's own thread (named for the reader op it
#: serves), XLA's compiler threads.
READER_THREAD_PREFIX = "tf_reader_thread_"
COMPILER_THREAD_MARKS = ("xla-cpu-codegen", "xla_compile")
