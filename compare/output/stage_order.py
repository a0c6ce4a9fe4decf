"""The order of the stages' work within a step, in words (added to the sequence answer of each
side in report.md)."""
from __future__ import annotations

import numpy as np

from compare.analysis.side import Side
from compare.fmt import duration as ms
from compare.vocabulary.labels import LABELS, PIPELINE


def stage_order(side: Side) -> str:
    """Stages in the order their work happens within the representative steady step: by the
    time half of each stage's work is done, with the span holding its middle 80%."""
    att = side.attribution
    st = att.representative()
    if st is None:
        return "No steps."
    e, t0, t1 = att.segments
    labels = att.segment_labels()
    a, b = np.clip(t0, st.ts, st.ts + st.dur), np.clip(t1, st.ts, st.ts + st.dur)
    m = (b > a) & np.isin(labels, list(PIPELINE)) & ~side.smap.wait[e]
    spans = []
    for lab in np.unique(labels[m]):
        k = np.flatnonzero(m & (labels == lab))
        k = k[np.argsort(a[k])]
        done = np.cumsum(b[k] - a[k]) / np.sum(b[k] - a[k])
        at = lambda q: float(a[k][np.searchsorted(done, q)])  # noqa: E731
        spans.append((at(0.5), at(0.1), float(b[k][np.searchsorted(done, 0.9)]),
                      LABELS[int(lab)]))
    chain = " -> ".join(f"{name} ({(lo - st.ts) / 1e3:.1f}-{(hi - st.ts) / 1e3:.1f} ms)"
                        for _, lo, hi, name in sorted(spans))
    return (f"By stage, in steady step {st.num} ({ms(st.dur)}): {chain} (ordered by when half "
            f"of each stage's work is done; the span holds its middle 80%).")
