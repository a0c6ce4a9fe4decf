"""The stage table ``compare.run`` prints (medians per steady step)."""
from __future__ import annotations

from compare.analysis.comparison import Comparison
from compare.fmt import duration


def cell(us: float | None) -> str:
    return duration(us) if us else "-"


def _opcol(ops: list[str], n: int = 28) -> str:
    s = ", ".join(o.split("/")[-1] for o in ops[:2])
    return s if len(s) <= n else s[: n - 1] + "…"


def stage_table(c: Comparison, width: int = 100) -> str:
    head = (f"{'stage':<12} {'legacy':>10} {'modern':>10} {'ratio':>7}   "
            f"{'legacy ops':<28} {'modern ops'}")
    lines = [head, "-" * min(width, len(head) + 30)]
    for row in c.stages:
        a, b = row.cells["legacy"], row.cells["modern"]
        if a.us == 0 and b.us == 0:
            continue
        ratio = f"{row.ratio:.1f}x" if row.ratio else "-"
        lines.append(f"{row.stage:<12} {cell(a.us):>10} {cell(b.us):>10} {ratio:>7}   "
                     f"{_opcol(a.ops):<28} {_opcol(b.ops)}")
    lg, md = c.sides["legacy"], c.sides["modern"]
    lines.append(f"{'unmapped':<12} {cell(lg.unmapped_us):>10} {cell(md.unmapped_us):>10}")
    a, b = lg.steps, md.steps
    lines.append(f"{'step':<12} {cell(a.median_us):>10} {cell(b.median_us):>10} "
                 + (f"{a.median_us / b.median_us:>6.1f}x" if b.median_us else ""))
    lines.append(f"{'first step':<12} {cell(a.first_us):>10} {cell(b.first_us):>10}")
    return "\n".join(lines)
