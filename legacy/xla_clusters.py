"""Which TF ops each XLA cluster of a legacy run holds, for each of its timelines.

A timeline shows a cluster only as ``cluster_N_1/xla_run``. The profile's HLO modules (see
:mod:`compare.hlo`) list the TF ops each ``cluster_N`` computes, but cluster numbers come from a
process-wide counter: ``timeline.json`` shares its session (and so its numbers) with the
profile, while ``timeline_first.json`` comes from a second session whose clusters are numbered
after the first session's. Auto-clustering is deterministic for one graph, so the k-th cluster
of one session is the k-th of the other; we check that by comparing each cluster's neighbours in
the two partition graphs (cluster numbers masked) and only alias clusters that agree.
"""
from __future__ import annotations

import re
from pathlib import Path

_NUM = re.compile(r"cluster_\d+(_\d+)?")


def _clusters(partition_graphs) -> dict[str, tuple]:
    """cluster function name -> signature (inputs and consumers, cluster numbers masked)."""
    nodes = [n for pg in partition_graphs for n in pg.node]
    prefix_of = {}
    for n in nodes:
        if n.op == "_XlaCompile" and "function" in n.attr:
            prefix_of[n.name.split("/")[0]] = n.attr["function"].func.name
    sig: dict[str, set] = {f: set() for f in prefix_of.values()}
    for n in nodes:
        own = prefix_of.get(n.name.split("/")[0])
        for inp in n.input:
            src = prefix_of.get(inp.lstrip("^").split("/")[0])
            if own and not src and n.op in ("_XlaCompile", "StatefulPartitionedCall"):
                sig[own].add(("in", _NUM.sub("cluster", inp)))
            if src and src != own:
                sig[src].add(("out", _NUM.sub("cluster", n.name)))
    return {f: tuple(sorted(s)) for f, s in sig.items()}


def _key(name: str) -> int:
    return int(name.split("_")[1])


def describe(run_dir: Path, metas: dict) -> dict:
    """The sidecar ``xla_clusters.json``: members of each cluster (from the profile's HLO) and,
    per timeline file, which profile cluster each of its clusters is."""
    from common.profiling import xplane_files
    from compare.hlo import modules_from_xplanes

    modules = modules_from_xplanes(xplane_files(run_dir), str(run_dir))
    members = {}
    for m in modules.values():
        if m.cluster.startswith("cluster_"):
            members[m.cluster] = [list(op) for op in m.all_tf_ops()]
    sigs = {name: _clusters(meta.partition_graphs) for name, meta in metas.items()}
    reference = sigs.get("timeline.json", {})
    ref_sorted = sorted(reference, key=_key)
    timelines = {}
    for name, s in sigs.items():
        mine = sorted(s, key=_key)
        aliases, mismatched = {}, 0
        if len(mine) == len(ref_sorted):
            for a, b in zip(mine, ref_sorted):
                if s[a] == reference[b]:
                    aliases[a] = b
                else:
                    mismatched += 1
        else:
            mismatched = len(mine)
        timelines[name] = {"aliases": aliases, "unmatched": mismatched}
    return {"about": "TF ops inside each XLA cluster (from the profile's HLO metadata); "
                     "timelines[file].aliases maps that file's cluster names to these",
            "clusters": members, "timelines": timelines}
