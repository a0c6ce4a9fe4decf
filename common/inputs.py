"""Which images a run reads, and a preflight that rejects bad ones before any graph runs.

Checks are cheap and done up front so that a bad file gives one line naming it, instead of an
error raised inside a queue-runner thread or a tf.data worker.
"""
from __future__ import annotations

import os
from pathlib import Path

from common.errors import InputError, tf_error_line
from common.stages import SHORT_SIDE

JPEG_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif")
#: The aspect-preserving resize makes the short side 256; a 1x4000 image would become
#: 256x1,024,000 (3 GB as float). Refuse images whose long side would exceed this after resize.
MAX_RESIZED_LONG_SIDE = 16 * SHORT_SIDE
#: Refuse decoded images above this many pixels (64 MP decodes to 0.8 GB as float32).
MAX_PIXELS = 100_000_000


def default_image() -> str:
    """matplotlib's bundled ``grace_hopper.jpg`` (600x512): present on any machine with matplotlib."""
    import matplotlib

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


def check_file(path: str) -> bytes:
    """Return the file's bytes, or raise InputError naming it (missing, unreadable, empty, not JPEG)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file")
    if p.is_dir():
        raise InputError(f"{path}: is a folder, not an image file")
    if not os.access(p, os.R_OK):
        raise InputError(f"{path}: permission denied")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if not data:
        raise InputError(f"{path}: empty file")
    if data[:3] != b"\xff\xd8\xff":
        kind = "a PNG" if data[:8] == b"\x89PNG\r\n\x1a\n" else "not a JPEG"
        raise InputError(f"{path}: {kind} file (no JPEG start-of-image marker)")
    return data


def preflight(paths: list[str]) -> list[tuple[int, int]]:
    """Check every image fully (header, size guard, full decode); return (height, width) each.

    Runs eagerly, outside any graph, so errors name the file instead of a graph node.
    """
    import tensorflow as tf

    shapes = []
    for path in paths:
        data = check_file(path)
        try:
            h, w, _ = (int(v) for v in tf.image.extract_jpeg_shape(data).numpy())
        except tf.errors.OpError:
            raise InputError(f"{path}: corrupt JPEG header") from None
        if h <= 0 or w <= 0:
            raise InputError(f"{path}: JPEG reports size {h}x{w}")
        if h * w > MAX_PIXELS:
            raise InputError(f"{path}: {w}x{h} is {h * w / 1e6:.0f} MP, above the "
                             f"{MAX_PIXELS / 1e6:.0f} MP limit")
        long_after = SHORT_SIDE * max(h, w) / min(h, w)
        if long_after > MAX_RESIZED_LONG_SIDE:
            raise InputError(f"{path}: aspect ratio {max(h, w)}:{min(h, w)} would resize to a "
                             f"{long_after:.0f}-pixel side (limit {MAX_RESIZED_LONG_SIDE}); "
                             f"crop it to at most {MAX_RESIZED_LONG_SIDE // SHORT_SIDE}:1 first")
        if min(h, w) < 1:
            raise InputError(f"{path}: image has an empty side")
        try:
            tf.io.decode_jpeg(data, channels=3)
        except tf.errors.OpError as e:
            raise InputError(f"{path}: JPEG does not decode ({tf_error_line(e)})") from None
        shapes.append((h, w))
    return shapes
