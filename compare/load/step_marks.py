"""Where a trace's steps are, from what the profiler marked, in this order (issue 15):

1. xprof's step rows: the ``Steps`` line of a device, one event per step (``step_name`` arg,
   ``group_id`` linking the step's host and device events), when every device that has one
   agrees (same groups at the same times);
2. step markers on host threads: ``Trace(name, step_num=N)`` (an event with a ``step_num``
   arg), ``ProfilerStep#N``, then Keras' ``train_function`` calls (one per step), then the
   root events xprof's step grouping named on host threads (``step_name`` only);
3. per-GPU step rows: devices whose ``Steps`` lines disagree (each GPU ran the step at its own
   time): the rows of the device with the most steps (the first such device on a tie); the
   others are kept in ``per_device``;
4. nothing: the caller infers TF1 session runs (``_SOURCE``) or takes the whole trace.

For xplane input :mod:`compare.load.xplane` replaces these with xprof's own step database.
"""
from __future__ import annotations

import dataclasses

from compare.model.events import Process, Step
from compare.vocabulary.ops import PROFILER_STEP, STEPS_LINE, TRAIN_FUNCTION

#: Events with no args that may still mark steps (checked by name).
NAME_MARK_PREFIXES = ("ProfilerStep#", "train_function", "EagerExecute: __inference_train",
                      "EagerLocalExecute: __inference_train", "__inference_train_function")
#: Step rows of two devices whose starts differ by more than this (µs) disagree.
ROWS_AGREE_US = 1.0
_INT32 = 1 << 31


@dataclasses.dataclass
class Found:
    steps: list[Step]
    source: str                                   # how they were found, in words
    group_step: dict[int, int]                    # xprof group id -> step number
    group_names: dict[int, str]                   # group id -> step name (for xprof's step db)
    per_device: dict[int, list[Step]]             # pid -> its own step rows (per-GPU mode)
    other_devices: list[int]                      # devices whose events go by time only
    numbered: bool = False                        # the program numbered the steps (step_num)


def _int(v) -> int | None:
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if -_INT32 <= n < _INT32 else None


class Marks:
    """Collects candidate step events while a trace loads; :meth:`steps` picks the steps."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []       # (pid, tid, group, name, ts, dur)
        self.markers: list[tuple] = []    # (num, group, name, ts, dur)
        self.profiler: list[tuple] = []   # (num, group, name, ts, dur)
        self.train: list[tuple] = []      # (pid, tid, group, name, ts, dur)

    def __bool__(self) -> bool:
        return bool(self.rows or self.markers or self.profiler or self.train)

    def add(self, e: dict, args: dict, name: str, group: int) -> bool:
        """Note ``e`` if it marks a step; True for events that only mark (no work)."""
        ts, dur = float(e["ts"]), float(e["dur"])
        if "step_num" in args:
            num = _int(args.get("step_num"))
            if num is not None:
                self.markers.append((num, group, name, ts, dur))
                return True
        if "step_name" in args:  # a device's Steps line (no step_num)
            self.rows.append((e["pid"], e["tid"], group, name, ts, dur))
            return True
        m = PROFILER_STEP.match(name)
        if m and _int(m.group(1)) is not None:
            self.profiler.append((int(m.group(1)), group, name, ts, dur))
            return True
        if TRAIN_FUNCTION.match(name):
            self.train.append((e["pid"], e["tid"], group, name, ts, dur))
        return False

    def steps(self, processes: dict[int, Process], lanes: dict[tuple[int, int], str]) -> Found:
        by_pid: dict[int, list[tuple]] = {}
        roots = []  # xprof's step-group roots on host threads (named "<event> <group>")
        for r in self.rows:
            if lanes.get((r[0], r[1])) == STEPS_LINE:
                by_pid.setdefault(r[0], []).append(r)
            else:
                roots.append((r[2], r[2], r[3], r[4], r[5]))
        marker_num = {g: n for n, g, *_ in self.markers if g >= 0}
        if by_pid and _agree(by_pid):
            rows = sorted(next(iter(by_pid.values())), key=lambda r: r[4])
            found = self._from_rows(rows, marker_num, "xprof's step rows (the Steps line of "
                                    + ", ".join(processes[p].name for p in sorted(by_pid)
                                                if p in processes) + ")", {}, [])
            # numbered by the program when every row's group has a step_num marker
            return dataclasses.replace(found, numbered=all(r[2] in marker_num for r in rows))
        for marks, words in ((self.markers, "step markers (Trace(..., step_num=N))"),
                             (self.profiler, "ProfilerStep#N markers")):
            if marks:
                return dataclasses.replace(_from_numbered(marks, words), numbered=True)
        if self.train:
            return _from_train(self.train)
        if any(0 <= r[0] < _INT32 for r in roots):
            return _from_numbered([r for r in roots if 0 <= r[0] < _INT32],
                                  "xprof's step groups (their root events on host threads)")
        if by_pid:
            pid = max(sorted(by_pid), key=lambda p: len(by_pid[p]))
            rows = sorted(by_pid[pid], key=lambda r: r[4])
            name = processes[pid].name if pid in processes else f"pid {pid}"
            per = {p: [Step(_row_num(r, marker_num, k), r[4], r[5], r[3])
                       for k, r in enumerate(sorted(rs, key=lambda r: r[4]))]
                   for p, rs in by_pid.items()}
            return self._from_rows(rows, marker_num, f"the step rows of {name} (each GPU has "
                                   f"step rows of its own, at different times)", per,
                                   sorted(by_pid))
        return Found([], "", {}, {}, {}, [])

    @staticmethod
    def _from_rows(rows, marker_num, words, per, others) -> Found:
        steps, group_step, names, used = [], {}, {}, set()
        top: int | None = None
        for k, (_, _, group, name, ts, dur) in enumerate(rows):
            num = _row_num((None, None, group, name), marker_num, k)
            if num in used and top is not None:
                num = top + 1   # the largest so far, kept (max(used) per row is quadratic)
            used.add(num)
            top = num if top is None else max(top, num)
            steps.append(Step(num, ts, dur, name))
            if group >= 0:
                group_step[group], names[group] = num, name
        return Found(steps, words, group_step, names, per, others)


def _row_num(r, marker_num: dict[int, int], k: int) -> int:
    """A step row's number: its host marker's step_num, else the number ending its name
    (``train 109``), else its group id, else its position."""
    group, name = r[2], r[3]
    if group in marker_num:
        return marker_num[group]
    num = _trailing_int(name or "")
    if num is not None:
        return num
    return group if 0 <= group < _INT32 else k


def _trailing_int(name: str) -> int | None:
    """The number ending ``name`` (``train 109``), if it fits int32. Read from the right: a
    regular expression's search for ``\\d+$`` is quadratic in a long run of digits that does
    not end the name."""
    digits = len(name) - len(name.rstrip("0123456789"))
    return _int(name[-digits:]) if 0 < digits <= 10 else None


def _agree(by_pid: dict[int, list[tuple]]) -> bool:
    """Every device's step rows are the same steps at the same times."""
    first = None
    for rows in by_pid.values():
        key = sorted((r[2], r[4]) for r in rows)
        if first is None:
            first = key
        elif len(key) != len(first) or any(
                a[0] != b[0] or abs(a[1] - b[1]) > ROWS_AGREE_US for a, b in zip(key, first)):
            return False
    return True


def _from_numbered(marks: list[tuple], words: str) -> Found:
    steps: dict[int, Step] = {}
    group_step, names = {}, {}
    for num, group, name, ts, dur in sorted(marks, key=lambda m: m[3]):
        steps.setdefault(num, Step(num, ts, dur, name))
        if group >= 0:
            group_step[group], names[group] = num, name
    return Found(sorted(steps.values(), key=lambda s: s.ts), words, group_step, names, {}, [])


def _from_train(train: list[tuple]) -> Found:
    """One step per outermost train_function call (nested ones are the same call)."""
    outer: list[tuple] = []
    reach: dict[tuple[int, int], float] = {}
    for pid, tid, group, name, ts, dur in sorted(train, key=lambda t: (t[4], -t[5])):
        if ts < reach.get((pid, tid), float("-inf")):
            continue
        reach[(pid, tid)] = ts + dur
        outer.append((group, ts, dur))
    steps, group_step, names = [], {}, {}
    for k, (group, ts, dur) in enumerate(sorted(outer, key=lambda o: o[1])):
        steps.append(Step(k, ts, dur, f"train_function call {k}"))
        if group >= 0:
            group_step[group], names[group] = k, f"train_function call {k}"
    return Found(steps, "Keras train_function calls (one per training step)", group_step,
                 names, {}, [])
