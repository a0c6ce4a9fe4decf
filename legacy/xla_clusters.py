"""Which TF ops each XLA cluster of a legacy run holds, for each of its timelines.

A timeline shows a cluster only as ``cluster_N_1/xla_run``. The profile's HLO modules (see
:mod:`common.hlo`) list the TF ops each ``cluster_N`` computes, but cluster numbers come from a
process-wide counter: ``timeline.json`` shares its session (and so its numbers) with the
profile, while ``timeline_first.json`` comes from a second session whose clusters are numbered
after the first session's. Auto-clustering is deterministic for one graph, so the k-th cluster
of one session is the k-th of the other; we check that by comparing each cluster's neighbours in
the two partition graphs (cluster numbers masked, neighbouring clusters named by rank) and only
alias clusters that agree.
"""
from __future__ import annotations

import re
from pathlib import Path

from common.hlo import modules_from_xplanes
from common.profiling import xplane_files

_NUM = re.compile(r"cluster_\d+(_\d+)?")


def _clusters(partition_graphs) -> dict[str, tuple]:
    """cluster function name -> signature: the cluster's inputs from outside any cluster and its
    consumers outside it; a neighbour that is another cluster's launch plumbing is named only by
    that cluster's rank (``cluster#k``), never by the plumbing node.

    The rank, not the node, because the plumbing around a cluster is not deterministic: TF
    routes some int32 inputs of a cluster's fallback call through a ``cluster_N_1/int32_id_n``
    IdentityN in some sessions and straight into ``stateful_partitioned_call`` in others (real
    partition graphs of both are test fixtures; docs/decisions.md), so naming the consumer node
    made the resize cluster fail to alias.
    """
    nodes = [n for pg in partition_graphs for n in pg.node]
    prefix_of = {}
    for n in nodes:
        if n.op == "_XlaCompile" and "function" in n.attr:
            prefix_of[n.name.split("/")[0]] = n.attr["function"].func.name
    rank = {f: f"cluster#{k}" for k, f in enumerate(sorted(set(prefix_of.values()), key=_key))}
    sig: dict[str, set] = {f: set() for f in prefix_of.values()}
    for n in nodes:
        own = prefix_of.get(n.name.split("/")[0])
        for inp in n.input:
            src = prefix_of.get(inp.lstrip("^").split("/")[0])
            if own and not src and n.op == "_XlaCompile":  # _XlaCompile takes every argument
                sig[own].add(("in", _NUM.sub("cluster", inp)))
            if src and src != own:
                sig[src].add(("out", rank[own] if own else _NUM.sub("cluster", n.name)))
    return {f: tuple(sorted(s)) for f, s in sig.items()}


def _key(name: str) -> int:
    return int(name.split("_")[1])


def alias(reference_graphs, graphs) -> tuple[dict[str, str], int]:
    """Which reference cluster each cluster of ``graphs`` is (partition graphs of two sessions
    of one graph): the k-th cluster of one is the k-th of the other when their signatures agree.
    Returns ({cluster: reference cluster}, number of clusters left unmatched)."""
    reference, mine = _clusters(reference_graphs), _clusters(graphs)
    ref_sorted, mine_sorted = sorted(reference, key=_key), sorted(mine, key=_key)
    if len(mine_sorted) != len(ref_sorted):
        return {}, len(mine_sorted)
    aliases = {a: b for a, b in zip(mine_sorted, ref_sorted) if mine[a] == reference[b]}
    return aliases, len(mine_sorted) - len(aliases)


def describe(run_dir: Path, metas: dict) -> dict:
    """The sidecar ``xla_clusters.json``: members of each cluster (from the profile's HLO) and,
    per timeline file, which profile cluster each of its clusters is."""

    modules = modules_from_xplanes(xplane_files(run_dir), str(run_dir))
    members = {}
    for m in modules.values():
        if m.cluster.startswith("cluster_"):
            members[m.cluster] = [list(op) for op in m.all_tf_ops()]
    reference = metas.get("timeline.json")
    timelines = {}
    for name, meta in metas.items():
        aliases, unmatched = alias(reference.partition_graphs if reference else [],
                                   meta.partition_graphs)
        timelines[name] = {"aliases": aliases, "unmatched": unmatched}
    return {"about": "TF ops inside each XLA cluster (from the profile's HLO metadata); "
                     "timelines[file].aliases maps that file's cluster names to these",
            "clusters": members, "timelines": timelines}
