"""Which images a run reads, and a preflight that rejects bad ones before any graph runs.

Checks are cheap and done up front so that a bad file gives one line naming it, instead of an
error raised inside a queue-runner thread or a tf.data worker.
"""
from __future__ import annotations

import io
import os
import stat
import warnings
from pathlib import Path

from common.errors import InputError, tf_error_line
from common.stages import SHORT_SIDE

JPEG_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif")
#: The aspect-preserving resize makes the short side 256; a 1x4000 image would become
#: 256x1,024,000 (3 GB as float). Refuse images whose long side would exceed this after resize.
MAX_RESIZED_LONG_SIDE = 16 * SHORT_SIDE
#: Refuse decoded images above this many pixels; a 64 MP image (0.8 GB as float32) still runs
#: (BENCHMARKS.md, docs/bad-input.md).
MAX_PIXELS = 100_000_000
#: Refuse image files above this size before reading them (a 100 MP JPEG at quality 100 is
#: ~40 MB; anything far beyond is not a photo we should load into memory).
MAX_FILE_BYTES = 256 << 20
#: Bad files named one by one in the error that refuses them; the rest are counted.
BAD_NAMED = 20
#: JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic; not DHT/JPG/DAC).
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def default_image() -> str:
    """matplotlib's bundled ``grace_hopper.jpg`` (600x512): present on any machine with matplotlib."""
    import matplotlib  # lazy: only to find its bundled image (~0.2 s to import)

    return str(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg")


def resolve_images(items: list[str] | None) -> list[str]:
    """Expand files and folders into a sorted list of JPEG paths (default: grace_hopper.jpg)."""
    if not items:
        return [default_image()]
    out: list[str] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(str(c) for c in p.iterdir()
                           if c.is_file() and c.suffix.lower() in JPEG_SUFFIXES)
            if not found:
                raise InputError(f"{item}: folder holds no .jpg/.jpeg files")
            out.extend(found)
        else:
            out.append(str(p))
    return out


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(height, width) from a JPEG's start-of-frame header, read without decoding; None if the
    markers before the frame header are damaged or missing."""
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            i += 2
            continue
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if length < 2:
            return None
        if marker in _SOF:
            if i + 9 > n:
                return None
            return (int.from_bytes(data[i + 5:i + 7], "big"),
                    int.from_bytes(data[i + 7:i + 9], "big"))
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        i += 2 + length
    return None


def check_size(path: str, h: int, w: int) -> None:
    """Refuse images that are empty, too many pixels, or too thin for the aspect-preserving
    resize (its long side would explode; see :data:`MAX_RESIZED_LONG_SIDE`)."""
    if h <= 0 or w <= 0:
        raise InputError(f"{path}: JPEG reports size {w}x{h} (width x height)")
    if h * w > MAX_PIXELS:
        raise InputError(f"{path}: {w}x{h} is {h * w / 1e6:.0f} MP, above the "
                         f"{MAX_PIXELS / 1e6:.0f} MP limit")
    long_after = SHORT_SIDE * max(h, w) / min(h, w)
    if long_after > MAX_RESIZED_LONG_SIDE:
        raise InputError(f"{path}: {w}x{h} has aspect ratio {max(h, w) / min(h, w):.0f}:1 and "
                         f"would resize to a {long_after:.0f}-pixel side (limit "
                         f"{MAX_RESIZED_LONG_SIDE}); crop it to at most "
                         f"{MAX_RESIZED_LONG_SIDE // SHORT_SIDE}:1 first")


def check_file(path: str) -> bytes:
    """Return the file's bytes, or raise InputError naming it (missing, unreadable, empty, too
    big, not JPEG, or a frame header whose size :func:`check_size` refuses). Needs no TensorFlow,
    so CLIs run it before anything is created."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:  # e.g. a folder on the way without search permission
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a folder, not an image file")
    if not stat.S_ISREG(mode):  # a FIFO would block the open, a device would never end
        raise InputError(f"{path}: not a regular file")
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise InputError(f"{path}: {size >> 20} MiB is above the {MAX_FILE_BYTES >> 20} "
                                 f"MiB limit for one image file")
            data = f.read(MAX_FILE_BYTES + 1)
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if not data:
        raise InputError(f"{path}: empty file")
    if data[:3] != b"\xff\xd8\xff":
        kind = "a PNG" if data[:8] == b"\x89PNG\r\n\x1a\n" else "not a JPEG"
        raise InputError(f"{path}: {kind} file (no JPEG start-of-image marker)")
    hw = jpeg_size(data)
    if hw is None:
        raise InputError(f"{path}: corrupt JPEG header (no frame header before the image data)")
    check_size(path, *hw)
    return data


def check_decodes(path: str, data: bytes) -> None:
    """An :class:`InputError` naming ``path`` unless its JPEG ``data`` decodes to the end: a
    file cut short, or corrupt in the middle past what libjpeg recovers from, is refused before
    any pipeline starts. libjpeg (through Pillow) decodes at 1/8 scale, which still reads
    every byte of the compressed data, so a 64 MP photo costs milliseconds and little memory;
    it refuses and accepts what TensorFlow's ``DecodeJpeg`` does
    (``tests/test_inputs.py`` compares the two on damaged files)."""
    from PIL import Image  # lazy: a native library only runs that check images need

    past = _segment_past_end(data)
    if past is not None:  # TensorFlow's reader refuses to read past the data; Pillow's skips
        raise InputError(f"{path}: JPEG does not decode (a marker at byte {past:,} declares "
                         f"more data than the file holds)")
    try:
        with warnings.catch_warnings(), Image.open(io.BytesIO(data), formats=["JPEG"]) as im:
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # ours: MAX_PIXELS
            im.draft(im.mode, (max(1, im.width // 8), max(1, im.height // 8)))
            im.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise InputError(f"{path}: JPEG does not decode ({str(e) or type(e).__name__})") from None


#: Markers that carry no length: TEM, the restart markers, start and end of image.
_NO_LENGTH = {0x01, *range(0xD0, 0xDA)}


def _segment_past_end(data: bytes) -> int | None:
    """Where a marker segment's declared length runs past the end of ``data``, if one does, as
    libjpeg reads the markers: in order, each segment skipped by its length, the compressed
    data after a start-of-scan up to the next marker (``FF`` then a byte that is neither 00
    nor a restart marker), until the end-of-image marker."""
    i, n = 2, len(data)
    while (j := data.find(b"\xff", i)) >= 0 and j + 1 < n:
        marker = data[j + 1]
        if marker in (0x00, 0xFF) or 0xD0 <= marker <= 0xD7:  # stuffing, fill, restarts
            i = j + 1 if marker == 0xFF else j + 2
            continue
        if marker == 0xD9:
            return None
        if marker in _NO_LENGTH:
            i = j + 2
            continue
        end = j + 2 + int.from_bytes(data[j + 2:j + 4], "big")
        if j + 4 > n or end > n:
            return j
        i = end
    return None


def check_image(path: str) -> None:
    """:func:`check_file` and :func:`check_decodes`: the whole file, without TensorFlow."""
    check_decodes(path, check_file(path))


def checked_images(items: list[str] | None, skip_bad: bool = False) -> tuple[list[str], list[dict]]:
    """The images ``items`` name (:func:`resolve_images`), every one checked whole
    (:func:`check_image`): (the usable paths, the bad ones as ``{"path", "reason"}``). Without
    ``skip_bad`` a bad file is an :class:`InputError` naming every bad one (the first
    :data:`BAD_NAMED`, the rest counted); with it, only a set with no usable image is."""
    good, bad = [], []
    for path in resolve_images(items):
        try:
            check_image(path)
            good.append(path)
        except InputError as e:
            bad.append({"path": path, "reason": str(e)})
    if bad and (not skip_bad or not good):
        raise InputError(_refusal(bad, len(good), skip_bad))
    return good, bad


def _refusal(bad: list[dict], usable: int, skip_bad: bool) -> str:
    """One line for :func:`checked_images`: the only bad file's reason as it is, or every bad
    file's reason and what ``--skip_bad`` would do."""
    if len(bad) == 1 and (usable or not skip_bad):
        return bad[0]["reason"]
    named = "; ".join(b["reason"] for b in bad[:BAD_NAMED])
    more = f"; and {len(bad) - BAD_NAMED} more" if len(bad) > BAD_NAMED else ""
    then = (f" (--skip_bad runs on the other {usable})" if usable else
            " (no usable image among them)")
    return f"{len(bad)} of {len(bad) + usable} images cannot be used{then}: {named}{more}"


def preflight(paths: list[str]) -> list[tuple[int, int]]:
    """Check every image fully (header, size guard, full decode); return (height, width) each.

    Runs eagerly, outside any graph, so errors name the file instead of a graph node.
    """
    import tensorflow as tf  # lazy: TensorFlow takes seconds to import

    shapes = []
    for path in paths:
        data = check_file(path)
        try:
            h, w, _ = (int(v) for v in tf.image.extract_jpeg_shape(data).numpy())
        except tf.errors.OpError:
            raise InputError(f"{path}: corrupt JPEG header") from None
        check_size(path, h, w)
        try:
            tf.io.decode_jpeg(data, channels=3)
        except tf.errors.OpError as e:
            raise InputError(f"{path}: JPEG does not decode ({tf_error_line(e)})") from None
        shapes.append((h, w))
    return shapes
