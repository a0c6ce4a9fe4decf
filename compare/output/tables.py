"""The tables ``compare.run`` prints (means per steady step, from the one account): the seed
pipeline's stages, the generic view of any TF program, the step difference term by term, and
the top of the op diff."""
from __future__ import annotations

from compare.analysis.opdiff import OpDiff
from compare.analysis.result import Comparison
from compare.fmt import duration, fit
from compare.output import compare_words

#: Op-diff rows printed on the terminal (report.md shows more).
TERMINAL_OPS = 8


def describe(r: OpDiff) -> str:
    """A row's name for a table: rows that share an op type stay apart (a type match lists
    its nodes, a scope match its nodes on both sides, a fusion its pieces)."""
    if r.status == "fused" and r.match == "xla":
        return f"{r.op} ({r.type}) <- {len(r.members)} ops"
    if r.status in ("fused", "unfused"):
        arrow = "<-" if r.status == "fused" else "->"
        return f"{r.op} ({r.type}) {arrow} " + " + ".join(m.rpartition("/")[2] for m in r.members)
    if r.match == "type":
        return f"{r.type} x{len(r.members)} by type: " + ", ".join(r.members[:3]) + \
            ("…" if len(r.members) > 3 else "")
    if r.match == "scope" and r.members and r.members != [r.op]:
        return f"{r.op} ({r.type}; " + ", ".join(r.members[:3]) + \
            ("…" if len(r.members) > 3 else "") + ")"
    return r.op if r.op == r.type else f"{r.op} ({r.type})"


def cell(us: float | None) -> str:
    return duration(us) if us else "-"


def _opcol(ops: list[str], n: int = 28) -> str:
    s = ", ".join(o.split("/")[-1] for o in ops[:2])
    return s if len(s) <= n else s[: n - 1] + "…"


def _fit_path(path: str, n: int) -> str:
    """A scope path in ``n`` characters, its middle dropped first: the top scope (forward or
    gradient) and the last ones (the layer, the op) tell ops apart; a cut end would not."""
    parts = path.split("/")
    if len(path) <= n or len(parts) < 3:
        return fit(path, n)
    for k in range(2, len(parts)):
        s = parts[0] + "/…/" + "/".join(parts[k:])
        if len(s) <= n:
            return s
    return "…" + path[-(n - 1):]


def _op_cell(r, n: int) -> str:
    """:func:`describe` in ``n`` characters; an op named after its type drops the type."""
    text = describe(r)
    if len(text) <= n or not text.startswith(r.op):
        return fit(text, n)
    rest = text[len(r.op):]
    if rest == f" ({r.type})" and r.op.rpartition("/")[2] == r.type:
        rest = ""
    return fit(_fit_path(r.op, max(n - len(rest), 12)) + rest, n)


def _cw(c: Comparison) -> int:
    """Width of a number column: the sides' labels, 10 to 18 characters."""
    return max(10, min(18, max(len(c.label(k)) for k in ("a", "b"))))


def _head(c: Comparison, first: str, w: int = 12) -> list[str]:
    n = _cw(c)
    a, b = fit(c.label("a"), n), fit(c.label("b"), n)
    head = (f"{first:<{w}} {a:>{n}} {b:>{n}} {'ratio':>7}   {fit(a, 24) + ' ops':<28} "
            f"{fit(b, 24) + ' ops'}")
    return [head, "-" * min(100, len(head) + 30)]


def stage_table(c: Comparison, width: int = 100) -> str:
    """The seed pipeline's stages and overheads (rows with time on either side)."""
    lines, n = _head(c, "stage"), _cw(c)
    for row in c.stages:
        a, b = row.cells["a"], row.cells["b"]
        if a.us == 0 and b.us == 0:
            continue
        ratio = f"{row.ratio:.1f}x" if row.ratio else "-"
        lines.append(f"{row.stage:<12} {cell(a.us):>{n}} {cell(b.us):>{n}} {ratio:>7}   "
                     f"{_opcol(a.ops):<28} {_opcol(b.ops)}")
    lg, md = c.sides["a"], c.sides["b"]
    lines.append(f"{'unmapped':<12} {cell(lg.unmapped_us):>{n}} {cell(md.unmapped_us):>{n}}")
    return "\n".join(lines + _step_lines(c))


def _step_lines(c: Comparison, w: int = 12) -> list[str]:
    a, b, n = c.sides["a"].steps, c.sides["b"].steps, _cw(c)
    # the program's first step only when the traces say so (a profile window starts later)
    first = "1st traced" if "window" in (a.first_kind, b.first_kind) else "first step"
    return [f"{'step (mean)':<{w}} {cell(a.mean_us):>{n}} {cell(b.mean_us):>{n}} "
            + (f"{a.mean_us / b.mean_us:>6.1f}x" if b.mean_us else ""),
            f"{first:<{w}} {cell(a.first_us):>{n}} {cell(b.first_us):>{n}}"]


def group_table(c: Comparison, max_rows: int = 14) -> str:
    """The generic view: what each run's steps are spent on, in any TF program's terms."""
    lines, n = _head(c, "group", 24), _cw(c)
    rows = [r for r in c.groups if r.group != "unmapped"]
    shown, rest = rows[:max_rows], rows[max_rows:]
    for r in shown:
        a, b = r.cells["a"], r.cells["b"]
        ratio = f"{a.us / b.us:.1f}x" if a.us and b.us else "-"
        lines.append(f"{fit(r.key, 24):<24} {cell(a.us):>{n}} {cell(b.us):>{n}} {ratio:>7}   "
                     f"{_opcol(a.ops):<28} {_opcol(b.ops)}")
    if rest:
        lines.append(f"{'(' + str(len(rest)) + ' more rows)':<24} "
                     f"{cell(sum(r.cells['a'].us for r in rest)):>{n}} "
                     f"{cell(sum(r.cells['b'].us for r in rest)):>{n}}")
    lines.append(f"{'unmapped':<24} {cell(c.group_unmapped_us('a')):>{n}} "
                 f"{cell(c.group_unmapped_us('b')):>{n}}")
    return "\n".join(lines + _step_lines(c, 24))


def ops_table(c: Comparison, n: int = TERMINAL_OPS) -> str:
    """The ``n`` largest per-op differences (per steady step)."""
    if not c.ops_diff:
        return compare_words.no_ops_words(c)
    w = _cw(c)
    la, lb = fit(c.label("a"), w), fit(c.label("b"), w)
    lines = [f"{'op (type)':<52} {la:>{w}} {lb:>{w}} {'delta':>10}  status",
             "-" * 100]
    for r in c.ops_diff[:n]:
        sign = "+" if r.delta_us > 0 else "-" if r.delta_us < 0 else ""
        lines.append(f"{_op_cell(r, 52):<52} {cell(r.a_us):>{w}} {cell(r.b_us):>{w}} "
                     f"{sign + duration(abs(r.delta_us)):>10}  {compare_words.status_words(r.status)}"
                     + (f" by {r.match}" if r.match in ("scope", "type") else ""))
    return "\n".join(lines)


def delta_table(c: Comparison) -> str:
    """The step difference's terms (they add up to it) and the ops behind each."""
    from compare.output.compare_words import TERM_WORDS, part_name, signed

    d, n = c.step_delta, _cw(c)
    if d is None:
        return ""
    a, b = fit(c.label("a"), n), fit(c.label("b"), n)
    lines = [f"{'term':<24} {a:>{n}} {b:>{n}} {'delta':>10}  ops behind it", "-" * 100]
    for t in d.terms:
        ops = ", ".join(f"{part_name(c, o).rpartition('/')[2]} {signed(o.delta_us)}"
                        for o in t.behind(2))
        noise = " (within spread)" if t.test.beyond is False else ""
        lines.append(f"{fit(TERM_WORDS.get(t.key, t.key).split(' (')[0], 24):<24} "
                     f"{cell(t.a_us):>{n}} {cell(t.b_us):>{n}} {signed(t.delta_us) or '0':>10}  "
                     f"{fit(ops, 40)}{noise}")
    basis = "mean traced span" if d.basis == "traced" else "step (mean)"
    lines.append(f"{basis:<24} {cell(d.a_us):>{n}} {cell(d.b_us):>{n}} "
                 f"{signed(d.delta_us) or '0':>10}")
    return "\n".join(lines)
