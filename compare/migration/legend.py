"""The lines under a pipeline's tf.data code that say what each name in it stands for: the
source, the per-example functions (the script's own statements, by function and line), the
random draws and their seeds, and where each argument of the chain came from."""
from __future__ import annotations

from collections.abc import Collection

from compare.migration import model as m
from compare.migration.rules import rule_for

#: Steps listed per map before the rest is summarised.
MAX_STEP_LINES = 14


def at(obj: m.Located) -> str:
    """``line 12``, or ``cell 3 line 12`` in a notebook."""
    cell = getattr(obj, "cell", None)
    return f"cell {cell} line {obj.line}" if cell else f"line {obj.line}"


def _short_call(qual: str) -> str:
    """``tf.x.y`` for a TensorFlow name, with what TF 2 uses instead when TF 2 removed it."""
    short = "tf." + qual[len("tensorflow."):] if qual.startswith("tensorflow.") else qual
    rule = rule_for(qual)
    return f"{short} (TF 2: {rule.tf2})" if rule is not None and rule.tf2 else short


#: A run of steps: (function, first line, last line, guards, TF calls, times, cell, loop).
_Group = tuple[str, int, int, tuple[str, ...], list[str], int, int | None, str]


def _groups(steps: list[m.Step]) -> list[_Group]:
    """Consecutive steps of one function under the same conditions, as
    (function, first line, last line, guards, TF calls, times, cell, loop)."""
    out: list[_Group] = []
    for s in steps:
        calls = [_short_call(c) for c in s.calls]
        if out and out[-1][0] == s.function and out[-1][3] == s.guards and (
                s.times == out[-1][5] and s.cell == out[-1][6] and s.loop == out[-1][7]):
            fn, first, last, guards, have, times, cell, loop = out[-1]
            out[-1] = (fn, first, max(last, s.end_line), guards,
                       have + [c for c in calls if c not in have], times, cell, loop)
        else:
            out.append((s.function, s.line, s.end_line, s.guards, calls, s.times, s.cell, s.loop))
    return out


def _map_lines(st: m.MapStage, seeded: bool = False) -> list[str]:
    args = "example, seed" if st.random or seeded else "example"
    return [f"{st.name}({args}): the script's per-example code, in order:"] + _step_lines(
        st.steps)


def _step_lines(steps: list[m.Step], per: str = "example") -> list[str]:
    out = []
    groups = _groups(steps)
    for fn, first, last, guards, calls, times, cell, loop in groups[:MAX_STEP_LINES]:
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        where = f"cell {cell} {where}" if cell else where
        text = f"  {fn} {where}" + (f": {', '.join(calls)}" if calls else "")
        if guards:
            text += f" (if {' and '.join(guards)})"
        if times > 1:
            text += f" (run {times} times per {per})"
        if loop:
            text += f" (in a loop of {loop})"
        out.append(text)
    if len(groups) > MAX_STEP_LINES:
        rest = groups[MAX_STEP_LINES:]
        out.append(f"  ... {len(rest)} more groups, lines {rest[0][1]}-{rest[-1][2]}")
    return out


def _random_lines(st: m.MapStage, root: m.Code | None) -> list[str]:
    if not st.random:
        return []
    out = [f"random draws in {st.name} (stateful in the script), each per example:"]
    shared_done: set[int] = set()
    for d in st.random:
        uses = f", on {d.uses} tensors" if d.uses > 1 else ""
        seed = f"seed={d.seed.text}" if d.seed is not None else "unseeded"
        out.append(f"  {d.construct} ({d.function} {at(d)}{uses}, {seed}) -> {d.stateless}")
    for d in st.random:
        if d.shares_seed_with and d.line not in shared_done:
            lines = sorted({d.line, *d.shares_seed_with})
            shared_done.update(lines)
            out.append(f"  lines {', '.join(map(str, lines))} share seed={m.req(d.seed).text} on "
                       "purpose: give them one and the same per-example seed, so what they "
                       "draw stays aligned (the same flip and crop for every tensor they touch)")
    alone = [d for d in st.random if not d.shares_seed_with]
    if alone:
        out.append(f"  the other draws each get their own seed, split from the example's seed "
                   f"(tf.random.experimental.stateless_split(seed, num={len(alone)}))")
    origin = (f"tf.data.Dataset.random(seed={root.text}), the seed the script gives "
              "tf.set_random_seed" if root is not None else
              "tf.data.Dataset.random(seed=None): pass a seed there to make runs repeat")
    out.append(f"  per-example seeds come from {origin}")
    return out


def _given(name: str, code: m.Code | None, default: object) -> str:
    """``name=value`` as the script gives it, or TF1's default, said to be one."""
    if code is None:
        return f"{name}={default!r} by default"
    return f"{name}={code.text}" + (" by default" if code.default else "")


def _shuffled(s: m.Source) -> str:
    if s.shuffle is None or (s.shuffle.default and s.shuffle.value is True):
        return f"shuffled each epoch ({_given('shuffle', s.shuffle, True)})"
    if not s.shuffle.known:
        return "shuffled only when " + s.shuffle.text
    return "shuffled each epoch" if s.shuffle.value else "shuffled never (shuffle=False)"


def _repeated(s: m.Source) -> str:
    e = s.num_epochs
    if e is None or e.is_value(None):
        return f"repeated forever ({_given('num_epochs', e, None)})"
    if e.is_value(1):
        return f"repeated once ({_given('num_epochs', e, None)})"
    return f"repeated {e.value} times" if e.known else f"repeated {e.text} times (None: forever)"


def _queue_source_lines(s: m.Source, where: str) -> list[str]:
    """Elements an enqueue op puts into an explicit queue: rows it enqueues, or what it
    computes each time it runs."""
    data = m.req(s.data).text
    what = (f"rows of {data}" if s.kind == "rows" else
            f"what the enqueue op computes each time it runs, {data}")
    runs = ("its QueueRunner runs the op again and again" if s.repeat or s.endless else
            "the script runs the op itself (no QueueRunner in this file runs it)")
    return [f"source: {what}{where}; {s.order}; {runs}"]


def _source_lines(s: m.Source) -> list[str]:
    where = f" ({s.site.construct}, {at(s.site)})" if s.site else ""
    if s.kind == "generator":
        f = m.req(s.feeder)
        by_line: dict[int, list[str]] = {}
        for ln, v in f.feeds:
            by_line.setdefault(ln, []).append(v)
        fed = "; ".join(f"{', '.join(vs)} at line {ln}" for ln, vs in by_line.items()) or (
            "nothing found")
        who = f"{f.function} ({'a thread' if f.thread else 'Python code'})"
        return [f"{m.generator_name(f)}: a generator made of {who}: its loop yields what it fed "
                f"through feed_dict ({fed}) instead of running the enqueue op{where}"]
    if s.order or s.kind == "computed":
        return _queue_source_lines(s, where)
    if s.kind in ("files", "file_pattern", "rows", "range"):
        what = {"files": "files", "file_pattern": "files matching", "rows": "rows of",
                "range": "the numbers below"}[s.kind]
        data = m.req(s.data).text
        bits = [f"source: {what} {data}{where}"]
        single = s.kind == "files" or (s.kind == "rows" and not s.columns)
        if single and not s.shuffle_note and m.literal_length(data) == 1:
            bits.append("one element: nothing to shuffle")
        elif s.shuffle_note:
            bits.append(f"shuffled {s.shuffle_note}")
        elif s.kind != "file_pattern" or s.shuffle is not None:
            bits.append(_shuffled(s))
        if s.repeat:
            bits.append(_repeated(s))
        if s.capacity is not None:
            bits.append(f"{_given('capacity', s.capacity, 32)} only sized the queue")
        return ["; ".join(bits)]
    if s.kind == "dataset":
        return [f"source: {m.req(s.data).text}{where}"]
    if s.kind == "provider":
        return [f"source: the files of {m.req(s.data).text}.data_sources{where}; {_shuffled(s)}; "
                f"{_repeated(s)}"]
    return []


def _stage_lines(st: m.Stage, root: m.Code | None,
                 seeded: Collection[str] = frozenset()) -> list[str]:
    if isinstance(st, m.ReadStage):
        if st.external:
            return [f"records: {st.origin} at {at(st.read)} reads the filename queue and makes "
                    "each record's tensors (defined outside this file)"]
        made = f", made at {at(st.made)}" if st.made else ""
        key = "; its key (the file name) is used" if st.key_used else ""
        many = (f"; {st.readers.text} readers at once" if st.readers is not None and
                not st.readers.is_value(1) else "")
        return [f"records: {st.origin} read at {at(st.read)}{made}{key}{many}"]
    if isinstance(st, m.UnbatchStage):
        return [f"unbatch: {st.site.construct} at {at(st.site)} put whole batches into the queue "
                "(enqueue_many): each row is an element"]
    if isinstance(st, m.DecodeStage):
        return [f"decoding: {st.decoder} turns each record into {st.items or 'the items'} "
                f"(provider.get at {at(st.site)}): set where the dataset is made"]
    if isinstance(st, m.ExternalStage):
        return [f"the rest: {st.call} at {at(st.site)} takes the queue; its dequeue, "
                "per-example code and batching are in another module"]
    if isinstance(st, m.MapStage):
        out = _map_lines(st, st.name in seeded)
        if st.parallel is not None:
            out.append(f"  num_parallel_calls={st.parallel.text}: {st.parallel_from}")
        return out + _random_lines(st, root)
    if isinstance(st, m.QueueStage):
        if st.queue == "random_shuffle" and st.when is not None and (
                st.site.construct.endswith("DatasetDataProvider")):
            if st.when.known and not st.when.value:
                return []
            cap = f"; {_given('common_queue_capacity', st.capacity, 256)} only bounded it" \
                if st.capacity else ""
            flag = "" if st.when.known else f" when {st.when.text}"
            return [f"shuffle buffer {m.req(st.min_after_dequeue).text}{flag}: "
                    f"{_given('common_queue_min', st.min_after_dequeue, 128)} of the "
                    f"DatasetDataProvider at {at(st.site)} (its records' RandomShuffleQueue)"
                    f"{cap}"]
        if st.queue == "random_shuffle" and st.when is not None:
            flag = "shuffle=True" if st.when.known else f"shuffle={st.when.text} is true"
            if st.when.known and not st.when.value:
                return []  # the source line says it is never shuffled
            return [f"shuffle buffer {m.req(st.min_after_dequeue).text}: when {flag}, "
                    f"{st.site.construct} at {at(st.site)} shuffled in a RandomShuffleQueue "
                    "keeping a quarter of queue_capacity (1000 by default)"]
        if st.queue == "random_shuffle" and st.site.construct.endswith("RecordInput"):
            size = _given("buffer_size", st.min_after_dequeue, 1)
            if st.min_after_dequeue is None or st.min_after_dequeue.is_value(1):
                return [f"no shuffle: {size} of the RecordInput at {at(st.site)} keeps one "
                        "record at a time"]
            return [f"shuffle buffer: {size} of the RecordInput at {at(st.site)}"]
        if st.queue == "random_shuffle":
            cap = f"; capacity={st.capacity.text} only bounded it" if st.capacity else ""
            return [f"shuffle buffer: min_after_dequeue of the RandomShuffleQueue at "
                    f"{at(st.site)}{cap}"]
        return []
    if isinstance(st, m.BatchStage):
        return _batch_lines(st)
    return [f"{at(o)}: {o.changed}" for o in st.ops if o.changed]


def _after_lines(st: m.BatchStage) -> list[str]:
    """The per-batch map: the script's code after the batch call, and its draws."""
    if not st.after:
        return []
    args = "batch, seed" if st.after_random else "batch"
    out = [f"{st.after_name}({args}): the script's per-batch code after the batch call, in "
           "order (what the pipeline function hands out is made here):"] + _step_lines(
        st.after, "batch")
    if st.after_random:
        out.append(f"random draws in {st.after_name} (stateful in the script), as often as the "
                   "script draws them (once per batch, unless in a loop), with a seed that comes "
                   "with each batch:")
    for d in st.after_random:
        seed = f"seed={d.seed.text}" if d.seed is not None else "unseeded"
        out.append(f"  {d.construct} ({d.function} {at(d)}, {seed}) -> {d.stateless}")
    return out


def _batch_lines(st: m.BatchStage) -> list[str]:
    return _batching_lines(st) + _after_lines(st)


def _batching_lines(st: m.BatchStage) -> list[str]:
    a = st.args
    out = [f"batching: {st.site.construct} at {at(st.site)}"]
    if a.get("min_after_dequeue") is not None:
        cap = f"; capacity={a['capacity'].text} only bounded the queue" if a.get("capacity") else ""
        out.append(f"  shuffle buffer {a['min_after_dequeue'].text}: its min_after_dequeue{cap}")
    small = a.get("allow_smaller_final_batch")
    if st.op in ("numpy_input_fn", "pandas_input_fn"):
        out.append(f"  drop_remainder: {st.op} takes full batches (dequeue_many) when it repeats "
                   "forever (num_epochs=None), else up to batch_size (dequeue_up_to: the last "
                   "may be short)")
        return out
    out.append("  drop_remainder: " + (
        "from dequeue_many (a short last batch is never returned)" if st.op == "dequeue_many"
        else "RecordInput's batches are always full" if st.op == "get_yield_op"
        else "from dequeue_up_to (the last batch may be short)" if st.op == "dequeue_up_to"
        else "allow_smaller_final_batch is False (the default)" if small is None
        else f"allow_smaller_final_batch={small.text}"))
    if st.padded:
        out.append("  padded_batch: " + ("dynamic_pad=True" if a.get("dynamic_pad") is not None
                                         else "the queue is a PaddingFIFOQueue"))
    many = a.get("enqueue_many")
    if many is not None and many.is_value(True):
        out.append("  enqueue_many=True: the tensors held whole batches, so they are unbatched "
                   "first")
    elif many is not None and not many.known:
        out.append(f"  enqueue_many={many.text}: when true, the tensors held whole batches and "
                   "are unbatched first")
    if st.copies is not None:
        out.append(f"  {st.copies.text} copies of the same preprocessing became one map")
    return out


def _branch_lines(v: m.Variant) -> list[str]:
    """Several streams zipped: what each is, and why a shared source keeps them paired."""
    out: list[str] = []
    if v.source.kind == "dataset":
        for b in v.branches:
            if b.source.kind == "unknown":
                out.append(f"{b.name}: a dataset made outside this function (unresolved below)")
                continue
            block = _source_lines(b.source)
            for st in b.stages:
                block += _stage_lines(st, v.root_seed)
            out += [f"{b.name}: a dataset the chain takes by name, built first"] + [
                "  " + ln for ln in block]
        return out + _source_lines(v.source)
    shared = v.source.kind != "zip"
    if shared:
        s = v.source
        lists = " and ".join(f"{m.req(b.source.data).text} ({at(m.req(b.source.site))})"
                             for b in v.branches)
        out += [f"source: the file lists {lists}, zipped; " + _source_lines(
            m.Source("files", None, m.Code("[]"), s.num_epochs, s.shuffle, None, s.capacity,
                     s.repeat))[0].split("; ", 1)[-1],
                f"  the producers share seed={m.req(s.seed).text}: their lists are zipped and shuffled "
                "once, so each element keeps its items together (as the shared seed did for the "
                "queues); each stream below reads its item, and both see one order because the "
                "shuffle has that seed"]
    for b in v.branches:
        block = [] if shared else _source_lines(b.source)
        for st in b.stages:
            block += _stage_lines(st, v.root_seed)
        out.append(f"{b.name}: " + (f"item {b.component + 1} of the source" if shared else
                                    "a stream of its own") + ", zipped with the others")
        out += ["  " + ln for ln in block]
    names = ", ".join(b.name for b in v.branches)
    out.append(f"each element of the zip is ({names}): the map below gets them together, as "
               "the script combined them")
    return out


def _entries(lines: list[str]) -> list[tuple[str, ...]]:
    """Lines grouped as entries: a top-level line with the indented lines under it."""
    out: list[list[str]] = []
    for ln in lines:
        if out and ln.startswith(" "):
            out[-1].append(ln)
        else:
            out.append([ln])
    return [tuple(e) for e in out]


def legend(p: m.Pipeline) -> list[str]:
    """What the names stand for: what every variant shares first, then what each adds under
    its condition."""
    out: list[str] = []
    seeded = {st.name for v in p.variants for st in v.maps() if st.random}
    blocks = []
    for v in p.variants:
        block = _branch_lines(v) if v.branches else _source_lines(v.source)
        for st in v.stages:
            block += _stage_lines(st, v.root_seed, seeded)
        blocks.append(_entries(block))
    head = tail = 0
    if len(blocks) > 1:  # entries every variant starts and ends with are said once
        shortest = min(len(b) for b in blocks)
        while head < shortest and all(b[head] == blocks[0][head] for b in blocks):
            head += 1
        while tail < shortest - head and all(b[-1 - tail] == blocks[0][-1 - tail]
                                             for b in blocks):
            tail += 1
    out += [ln for e in blocks[0][:head] for ln in e]
    said: dict[tuple[str, ...], str] = {}  # entry -> the condition it was first listed under
    for v, entries in zip(p.variants, blocks):
        when = " and ".join(c if val else f"not {c}" for c, val in v.when)
        own: list[str] = []
        for e in entries[head:len(entries) - tail]:
            if e in said and len(e) > 1:  # listed in full under another condition
                own.append(f"{e[0].rstrip(':')} (as when {said[e]})")
            else:
                own += e
                said.setdefault(e, when)
        if when and len(p.variants) > 1:
            out += [f"when {when}:"] + ["  " + ln for ln in own] if own else []
        elif when:
            out += [f"built only when {when}"] + own
        else:
            out += own
    out += [ln for e in blocks[0][len(blocks[0]) - tail:] for ln in e]
    if p.kind == "tf.data":
        out.append("iterate the dataset itself (for element in ds:) instead of its iterator and "
                   "get_next(); a new loop replaces re-running an initializer")
    return out
