"""Images checked whole before any run (common/inputs.py): a JPEG cut short or corrupt in the
middle is refused in milliseconds, without TensorFlow; a folder with several bad images names
every one; ``skip_bad`` keeps the good ones. The slow test holds the check to TensorFlow's own
``DecodeJpeg``: on damaged files made from a real photo, both refuse and accept the same ones.
"""
from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from common.errors import InputError
from common.inputs import BAD_NAMED, check_decodes, check_image, checked_images, default_image
from tests.conftest import ROOT


def _photo() -> bytes:
    return Path(default_image()).read_bytes()


def _jpeg(mode: str = "RGB", progressive: bool = False, size=(64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.open(io.BytesIO(_photo())).convert(mode).resize(size).save(
        buf, "JPEG", progressive=progressive, quality=90)
    return buf.getvalue()


def _scan_start(data: bytes) -> int:
    """Where the compressed image data starts (after the start-of-scan header)."""
    sos = data.index(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")


def _damaged(data: bytes, how: str, rng: random.Random) -> bytes:
    """``data`` damaged as files are: cut, a stretch overwritten, zeroed or dropped, a stray
    marker, one bit flipped; always inside the compressed data."""
    start, n = _scan_start(data), len(data)
    at = rng.randrange(start + 16, n - 64)
    b = bytearray(data)
    if how == "cut":
        return bytes(b[:at])
    if how == "garbage":
        b[at:at + 64] = bytes(rng.randrange(256) for _ in range(64))
    elif how == "zeros":
        b[at:at + 2000] = bytes(min(2000, n - at))
    elif how == "dropped":
        del b[at:at + 1000]
    elif how == "marker":
        b[at:at] = bytes([0xFF, rng.choice([0xD9, 0xC4, 0xDB, 0x67, 0xE1])])
    else:
        b[at] ^= 1 << rng.randrange(8)
    return bytes(b)


@pytest.mark.parametrize("mode, progressive", [("RGB", False), ("RGB", True), ("L", False),
                                               ("CMYK", False)])
def test_a_whole_jpeg_passes(tmp_path, mode, progressive):
    check_decodes("x.jpg", _jpeg(mode, progressive))
    check_decodes("photo.jpg", _photo())


@pytest.mark.parametrize("cut", [0.4, 0.9, 0.999])
def test_a_jpeg_cut_short_does_not_decode(cut):
    data = _photo()
    with pytest.raises(InputError, match=r"^x\.jpg: JPEG does not decode \(image file is "
                                         r"truncated"):
        check_decodes("x.jpg", data[:int(len(data) * cut)])


UNKNOWN_MARKER = b"\xff\x67\x00\x02"  # a marker libjpeg does not know, its segment empty


def test_a_jpeg_with_a_bad_marker_in_the_middle_does_not_decode():
    data = _photo()
    at = (_scan_start(data) + len(data)) // 2
    bad = data[:at] + UNKNOWN_MARKER + data[at:]
    with pytest.raises(InputError, match=r"^x\.jpg: JPEG does not decode \(broken data stream"):
        check_decodes("x.jpg", bad)


def test_a_marker_whose_segment_runs_past_the_end_does_not_decode():
    """What TensorFlow's reader refuses (it will not read past the data) and Pillow's skips:
    a comment in the middle of the image data claiming 50,000 bytes, 10,000 before the end."""
    data = _photo()
    at = len(data) - 10_000
    bad = data[:at] + b"\xff\xfe" + (50_000).to_bytes(2, "big") + data[at:]
    with pytest.raises(InputError, match=rf"^x\.jpg: JPEG does not decode \(a marker at byte "
                                         rf"{at:,} declares more data than the file holds\)$"):
        check_decodes("x.jpg", bad)
    fits = data[:at] + b"\xff\xfe" + (5_000).to_bytes(2, "big") + data[at:]
    check_decodes("x.jpg", fits)  # the same comment within the file: libjpeg recovers


def test_the_check_needs_no_tensorflow():
    code = ("import sys; from common.inputs import check_image, default_image; "
            "check_image(default_image()); print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def _folder(tmp_path: Path, bad: dict[str, bytes], good: int = 2) -> Path:
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(good):
        (folder / f"good{i}.jpg").write_bytes(_jpeg())
    for name, data in bad.items():
        (folder / name).write_bytes(data)
    return folder


def _bad_set() -> dict[str, bytes]:
    data = _photo()
    at = (_scan_start(data) + len(data)) // 2
    return {"cut.jpg": data[: len(data) // 2], "empty.jpg": b"",
            "marker.jpg": data[:at] + UNKNOWN_MARKER + data[at:],
            "png.jpg": b"\x89PNG\r\n\x1a\n" + bytes(100)}


def test_a_folder_with_several_bad_images_names_every_one(tmp_path):
    folder = _folder(tmp_path, _bad_set())
    with pytest.raises(InputError) as e:
        checked_images([str(folder)])
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith("4 of 6 images cannot be used (--skip_bad runs on the other 2): "), text
    for name, words in (("cut.jpg", "JPEG does not decode (image file is truncated"),
                        ("empty.jpg", "empty file"),
                        ("marker.jpg", "JPEG does not decode (broken data stream"),
                        ("png.jpg", "a PNG file")):
        assert f"{folder / name}: {words}" in text, (name, text)
    assert "good" not in text


def test_skip_bad_keeps_the_good_ones_and_names_the_rest(tmp_path):
    folder = _folder(tmp_path, _bad_set())
    good, bad = checked_images([str(folder)], skip_bad=True)
    assert good == [str(folder / "good0.jpg"), str(folder / "good1.jpg")]
    assert [b["path"] for b in bad] == [str(folder / n) for n in sorted(_bad_set())]
    assert all(b["reason"].startswith(b["path"] + ": ") for b in bad)


def test_one_bad_image_is_the_one_line_it_always_was(tmp_path):
    folder = _folder(tmp_path, {"empty.jpg": b""})
    with pytest.raises(InputError, match=r"^\S+empty\.jpg: empty file$"):
        checked_images([str(folder)])


def test_all_bad_is_refused_even_with_skip_bad(tmp_path):
    folder = _folder(tmp_path, _bad_set(), good=0)
    with pytest.raises(InputError, match=r"^4 of 4 images cannot be used \(no usable image "
                                         r"among them\): "):
        checked_images([str(folder)], skip_bad=True)


def test_many_bad_images_are_named_up_to_a_bound_and_counted(tmp_path):
    folder = _folder(tmp_path, {f"e{i:02}.jpg": b"" for i in range(BAD_NAMED + 5)})
    with pytest.raises(InputError) as e:
        checked_images([str(folder)])
    text = str(e.value)
    assert text.count(": empty file") == BAD_NAMED and text.endswith("; and 5 more")


@pytest.mark.slow
def test_the_check_refuses_and_accepts_what_tensorflow_decodes(tmp_path):
    """On a real photo damaged 240 ways (seeded) and on the bad-input corpus's images (made
    here: grayscale, CMYK, extreme sizes, a PNG named .jpg, ...), the check and
    TensorFlow's ``DecodeJpeg`` agree on every file: none is refused that the pipelines would
    read, none passes that they would refuse."""
    import tensorflow as tf

    from tests.corpus.make_corpus import make_images

    rng = random.Random(26)
    files = {f"{how}-{i}": _damaged(_photo(), how, rng) for i in range(40)
             for how in ("cut", "garbage", "zeros", "dropped", "marker", "flip")}
    files.update({k: Path(p).read_bytes() for k, p in make_images(tmp_path).items()
                  if Path(p).is_file() and k not in ("img_noperm.jpg", "img_png.jpg")})
    disagree, refused = [], 0
    for name, data in files.items():
        try:
            tf.io.decode_jpeg(data, channels=3)
            tf_ok = True
        except (tf.errors.OpError, ValueError):
            tf_ok = False
        try:
            check_image_bytes(name, data)
            ours = True
        except InputError:
            ours = False
        refused += not ours
        if tf_ok != ours:
            disagree.append((name, tf_ok, ours))
    assert not disagree, disagree
    assert 40 <= refused <= len(files) - 40, refused  # both kinds are in the set


def check_image_bytes(name: str, data: bytes) -> None:
    """:func:`check_decodes` on bytes that have no file, after the header checks
    :func:`check_image` makes (no JPEG marker, an empty file)."""
    if not data or data[:3] != b"\xff\xd8\xff":
        raise InputError(f"{name}: not a JPEG")
    check_decodes(name, data)


def test_check_image_reads_the_file(tmp_path):
    p = tmp_path / "x.jpg"
    p.write_bytes(_jpeg())
    check_image(str(p))
    p.write_bytes(_jpeg()[:200])
    with pytest.raises(InputError, match="x.jpg: "):
        check_image(str(p))
