"""Make the bad-input corpus: broken images and broken traces, every one a file a user could
really hand us.

Images are made from matplotlib's grace_hopper.jpg with Pillow (a real libjpeg encoder: CMYK
and grayscale JPEGs, a PNG renamed .jpg, extreme aspect ratios, 8000x8000). Traces are made from
real TensorFlow output of our own legacy run (its timeline.json, run.json and .xplane.pb), cut,
mutated and re-wrapped. Nothing big is held in memory: the 10 GB gzip bomb is written in
repeated compressed members.

    python -m tests.corpus.make_corpus DEST --run LEGACY_RUN_DIR

Also used by the session fixture ``corpus`` in tests/conftest.py, which makes it in a temp
folder. :data:`IMAGES` and :data:`TRACES` name every item and what it is. :data:`HOSTILE`
items are traces of hostile *structure* (issue 19), generated from nothing by
:mod:`benchmarks.hostile` (fixture ``hostile_corpus``, no TensorFlow run needed), gzipped where
that keeps them small.
"""
from __future__ import annotations

import argparse
import copy
import glob
import json
import os
import zlib
from pathlib import Path

#: image item -> what it is
IMAGES = {
    "img_empty.jpg": "an empty file",
    "img_truncated.jpg": "a JPEG cut at 40 % of its bytes",
    "img_png.jpg": "a PNG file named .jpg",
    "img_gray.jpg": "a grayscale (1-channel) JPEG",
    "img_cmyk.jpg": "a CMYK JPEG (Adobe), as print workflows write",
    "img_1x4000.jpg": "1 pixel wide, 4000 high",
    "img_4000x1.jpg": "4000 pixels wide, 1 high",
    "img_8000x8000.jpg": "8000x8000 (64 MP)",
    "img_claims_60000x60000.jpg": "a small JPEG whose frame header claims 60000x60000",
    "img_folder.jpg": "a folder named like an image, holding no JPEG",
    "img_noperm.jpg": "a valid JPEG with mode 000",
}
#: trace item -> what it is
TRACES = {
    "tr_empty.json": "an empty file",
    "tr_truncated.json": "a real timeline.json cut mid-event",
    "tr_truncated.json.gz": "a real timeline.json, gzipped, gzip stream cut in half",
    "tr_damaged_middle.json": "a real timeline.json with one event in the middle garbled",
    "tr_non_utf8.json": "a real timeline.json with Latin-1 bytes in op names",
    "tr_not_a_trace.json": "valid JSON that is not a trace (a run.json)",
    "tr_list_of_numbers.json": "a JSON list of numbers",
    "tr_unknown_ph.json": "a real timeline with events of unknown ph values added",
    "tr_unclosed_be.json": "a real timeline with B events never closed and E events never opened",
    "tr_bad_dur.json": "a real timeline where some events have negative or missing dur",
    "tr_no_pid_tid.json": "a real timeline where some events lack pid or tid",
    "tr_all_no_pid_tid.json": "a real timeline where no event has pid or tid",
    "tr_bomb.json.gz": "10 MB of gzip that expands to 10 GiB of JSON trace events and whitespace",
    "tr_corrupt.xplane.pb": "a real .xplane.pb cut in half",
    "tr_garbage.xplane.pb": "bytes that are no protobuf at all",
    "tr_empty_logdir": "an empty folder",
}


#: hostile structure item -> what it is (made by :func:`make_hostile`)
HOSTILE = {
    "tr_nested_lists.json": "traceEvents holding 200,000 nested empty lists (400 KB)",
    "tr_nested_args.json": "good events around one whose args nest 100,000 objects deep",
    "tr_many_pids.json.gz": "200,000 events, each on a process of its own",
    "tr_many_tids.json.gz": "200,000 events on one process, each on a thread of its own",
    "tr_many_names.json.gz": "200,000 events, each with a name of its own",
    "tr_many_steps.json.gz": "20,000 marked steps under 50 threads' events spanning them all",
    "tr_flow_storm.json.gz": "100,000 flow arrows between ops, 50,000 more on one id",
    "tr_timeline_storm.json.gz": "a timeline.py trace whose nodes run 200,000 times over",
    "tr_long_name.json.gz": "an event named by a 50 MB string, its process and thread by 1 MB",
    "tr_wrong_types.json": "events whose name is an object, pid a string, tid a list ...",
    "tr_damaged_big.json.gz": "200,000 events, one of them garbled in the middle",
}


def make_hostile(dest: Path) -> dict[str, Path]:
    """Write the :data:`HOSTILE` items into ``dest``; return name -> path."""
    import gzip

    from benchmarks import hostile

    dest.mkdir(parents=True, exist_ok=True)
    made = {
        "tr_nested_lists.json": hostile.nested_lists(200_000),
        "tr_nested_args.json": hostile.nested_args(100_000),
        "tr_many_pids.json.gz": hostile.many_pids(200_000),
        "tr_many_tids.json.gz": hostile.many_tids(200_000),
        "tr_many_names.json.gz": hostile.many_names(200_000),
        "tr_many_steps.json.gz": hostile.many_steps(20_000),
        "tr_flow_storm.json.gz": hostile.flow_storm(50_000),
        "tr_timeline_storm.json.gz": hostile.timeline_storm(200_000),
        "tr_long_name.json.gz": hostile.long_name(50 << 20),
        "tr_wrong_types.json": _wrong_types(hostile),
        "tr_damaged_big.json.gz": _damaged_big(),
    }
    out = {}
    for name, pieces in made.items():
        data = "".join(pieces).encode()
        out[name] = dest / name
        out[name].write_bytes(gzip.compress(data, 6, mtime=0) if name.endswith(".gz") else data)
    return out


def _wrong_types(hostile):
    """One event per field of the wrong type, nothing else usable."""
    events = []
    for k, field in enumerate(("name", "pid", "tid", "ts", "dur")):
        e = {"ph": "X", "pid": 1, "tid": 1, "ts": k * 10, "dur": 5, "name": "op"}
        e[field] = hostile.WRONG_TYPES[field]
        events.append(json.dumps(e))
    return ['{"traceEvents":[', ",".join(events), "]}"]


def _damaged_big():
    """200,000 events; the one in the middle garbled (a NUL byte, and '}, {' in a string)."""
    events = [f'{{"ph":"X","pid":1,"tid":{i % 4},"ts":{i * 10},"dur":8,"name":"op"}}'
              for i in range(200_000)]
    events[100_000] = '{"ph":"X","pid":1\x00,"name":"x}, {"}'
    return ['{"traceEvents":[', ",".join(events), "]}"]


def _grace_hopper():
    import matplotlib
    from PIL import Image

    return Image.open(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg")


def make_images(dest: Path) -> dict[str, Path]:
    """Write the image items into ``dest``; return name -> path."""
    from PIL import Image

    dest.mkdir(parents=True, exist_ok=True)
    im = _grace_hopper().convert("RGB")
    p = {name: dest / name for name in IMAGES}
    p["img_empty.jpg"].write_bytes(b"")
    im.save(dest / "_whole.jpg", quality=90)
    whole = (dest / "_whole.jpg").read_bytes()
    os.unlink(dest / "_whole.jpg")
    p["img_truncated.jpg"].write_bytes(whole[: len(whole) * 2 // 5])
    im.save(p["img_png.jpg"], format="PNG")
    im.convert("L").save(p["img_gray.jpg"], quality=90)
    im.convert("CMYK").save(p["img_cmyk.jpg"], quality=90)
    im.resize((1, 4000)).save(p["img_1x4000.jpg"])
    im.resize((4000, 1)).save(p["img_4000x1.jpg"])
    im.resize((8000, 8000), Image.BILINEAR).save(p["img_8000x8000.jpg"], quality=80)
    # A real 64x64 JPEG whose SOF0 header is patched to claim 60000x60000 (a decompression bomb
    # for images: a few KB that would decode to 10 GB).
    im.resize((64, 64)).save(p["img_claims_60000x60000.jpg"], quality=90)
    raw = bytearray(p["img_claims_60000x60000.jpg"].read_bytes())
    sof = raw.index(b"\xff\xc0")
    raw[sof + 5:sof + 9] = (60000).to_bytes(2, "big") * 2
    p["img_claims_60000x60000.jpg"].write_bytes(bytes(raw))
    p["img_folder.jpg"].mkdir(exist_ok=True)
    (p["img_folder.jpg"] / "notes.txt").write_text("not an image\n")
    im.save(p["img_noperm.jpg"], quality=90)
    os.chmod(p["img_noperm.jpg"], 0)
    return p


def _events(doc) -> list:
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def make_traces(dest: Path, run_dir: Path) -> dict[str, Path]:
    """Write the trace items into ``dest`` from the real legacy run in ``run_dir``."""
    dest.mkdir(parents=True, exist_ok=True)
    p = {name: dest / name for name in TRACES}
    timeline = (run_dir / "timeline.json").read_bytes()
    doc = json.loads(timeline)
    xs = [e for e in _events(doc) if e.get("ph") == "X"]

    def with_events(name: str, mutate) -> None:
        d = copy.deepcopy(doc)
        mutate(_events(d))
        p[name].write_text(json.dumps(d))

    p["tr_empty.json"].write_bytes(b"")
    # cut inside an event: find an event start past the middle and cut a few bytes into it
    cut = timeline.index(b'"ph": "X"', len(timeline) // 2) + 5
    p["tr_truncated.json"].write_bytes(timeline[:cut])
    mid = timeline.index(b'"ph": "X"', len(timeline) // 2)
    p["tr_damaged_middle.json"].write_bytes(timeline[:mid] + b'"ph": "X", "pid": 1\x00}}}:'
                                            + timeline[mid + 9:])
    gz = _gzip(timeline)
    p["tr_truncated.json.gz"].write_bytes(gz[: len(gz) // 2])
    # op names of the real trace with Latin-1 bytes (as a TF1-era tool on a cp1252 box wrote)
    p["tr_non_utf8.json"].write_bytes(timeline.replace(b'"DecodeJpeg"', b'"D\xe9codeJpeg"')
                                      .replace(b'"ReaderReadV2"', b'"Reader\xffReadV2"'))
    p["tr_not_a_trace.json"].write_bytes((run_dir / "run.json").read_bytes())
    p["tr_list_of_numbers.json"].write_text(json.dumps(list(range(1000))))

    def unknown_ph(ev):
        for i, ph in enumerate(("Q", "z", 7, None, "XX")):
            ev.append({"ph": ph, "pid": 1, "tid": 0, "ts": xs[i]["ts"], "name": f"odd{i}"})
    with_events("tr_unknown_ph.json", unknown_ph)

    def unclosed(ev):
        t0 = xs[0]["ts"]
        ev.extend([{"ph": "B", "pid": 1, "tid": 99, "ts": t0, "name": "opened"},
                   {"ph": "B", "pid": 1, "tid": 99, "ts": t0 + 5, "name": "nested"},
                   {"ph": "E", "pid": 1, "tid": 99, "ts": t0 + 8},
                   {"ph": "E", "pid": 1, "tid": 98, "ts": t0 + 9}])  # no B on tid 98
    with_events("tr_unclosed_be.json", unclosed)

    def bad_dur(ev):
        x = [e for e in ev if e.get("ph") == "X"]
        for e in x[::7]:
            e["dur"] = -abs(e.get("dur", 1)) - 1
        for e in x[3::7]:
            e.pop("dur", None)
    with_events("tr_bad_dur.json", bad_dur)

    def no_pid_tid(ev):
        x = [e for e in ev if e.get("ph") == "X"]
        for e in x[::5]:
            e.pop("pid", None)
        for e in x[2::5]:
            e.pop("tid", None)
    with_events("tr_no_pid_tid.json", no_pid_tid)

    def all_no_pid_tid(ev):
        for e in ev:
            e.pop("pid", None)
            e.pop("tid", None)
    with_events("tr_all_no_pid_tid.json", all_no_pid_tid)

    write_gzip_bomb(p["tr_bomb.json.gz"])
    (xplane,) = glob.glob(str(run_dir / "plugins" / "profile" / "*" / "*.xplane.pb"))
    data = Path(xplane).read_bytes()
    p["tr_corrupt.xplane.pb"].write_bytes(data[: len(data) // 2])
    p["tr_garbage.xplane.pb"].write_bytes(bytes(range(7, 256)) * 40)
    p["tr_empty_logdir"].mkdir(exist_ok=True)
    return p


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, mtime=0)


def _gzip_member(first: bytes, segment: bytes, repeat: int) -> bytes:
    """One gzip member holding ``first`` then ``segment`` ``repeat`` times, built without ever
    holding the expanded data: ``segment`` is deflated once, ending in a full flush (byte
    aligned, no back-references across it), so its compressed bytes can simply be repeated."""
    def deflated(data: bytes) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)

    body = deflated(first) + deflated(segment) * repeat
    final = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)  # an empty final block
    crc = zlib.crc32(first)
    for _ in range(repeat):
        crc = zlib.crc32(segment, crc)
    size = len(first) + len(segment) * repeat
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"
    return header + body + final + crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")


def write_gzip_bomb(path: Path, gib: int = 10) -> None:
    """A valid gzip file of about 10 MB that expands to ``gib`` GiB of a well-formed trace event
    list (``{"traceEvents":[{...},   ...   {...}, ...``, one event per MiB of whitespace, which
    deflates at its ~1000x limit), as ``gib`` concatenated 1 GiB members (RFC 1952
    allows several; ``gzip -d`` and Python's gzip read them all)."""
    event = b'{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"bomb"},'
    segment = event + b" " * ((1 << 20) - len(event))  # whitespace deflates ~1000x
    repeat = (1 << 30) // len(segment)
    head = _gzip_member(b'{"traceEvents":[', segment, repeat)
    rest = _gzip_member(b"", segment, repeat)
    with open(path, "wb") as f:
        f.write(head)
        for _ in range(gib - 1):
            f.write(rest)


def make(dest: Path, run_dir: Path) -> dict[str, Path]:
    """The corpus made from a legacy run in ``dest`` (images/ and traces/); return item name
    -> path. The hostile items are made apart (:func:`make_hostile`): they need no run."""
    return {**make_images(dest / "images"), **make_traces(dest / "traces", run_dir)}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.corpus.make_corpus", description=(
        "Make the bad-input corpus of the tests: broken images made from grace_hopper.jpg "
        "and broken traces made from a real legacy run folder (--run)."))
    ap.add_argument("dest", type=Path)
    ap.add_argument("--run", type=Path, required=True,
                    help="a legacy run folder (python -m legacy.run --out DIR)")
    a = ap.parse_args()
    items = {**make(a.dest, a.run), **make_hostile(a.dest / "hostile")}
    for name, path in items.items():
        print(f"{path}  ({(IMAGES | TRACES | HOSTILE)[name]})")


if __name__ == "__main__":
    main()
