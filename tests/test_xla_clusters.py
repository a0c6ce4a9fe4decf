"""Aliasing a legacy run's XLA clusters across its two sessions (legacy/xla_clusters.py).

The fixtures are real partition graphs (RunMetadata, gzip) of the legacy XLA graph from one
``run_legacy`` where the two sessions wired the resize cluster's int32 outputs differently: the
fresh session sent one of them through the next cluster's ``int32_id_n`` IdentityN, the steady
one straight into its ``stateful_partitioned_call``. That made the resize cluster fail to alias.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

#: The partition graphs are TensorFlow protos: every test imports TensorFlow (seconds).
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"


def _graphs(which: str):
    from tensorflow.core.protobuf import config_pb2

    rm = config_pb2.RunMetadata()
    rm.ParseFromString(gzip.decompress(
        (FIXTURES / f"legacy_xla_partition_graphs_{which}.pb.gz").read_bytes()))
    return list(rm.partition_graphs)


def _int32_plumbing_inputs(graphs) -> set[str]:
    return {i.split("/")[-1] for g in graphs for n in g.node
            if n.name.endswith("/int32_id_n") for i in n.input if "merge_oidx" in i}


def test_fixture_really_has_the_nondeterministic_plumbing():
    steady, first = _graphs("steady"), _graphs("first")
    assert _int32_plumbing_inputs(first) != _int32_plumbing_inputs(steady)


def test_every_cluster_aliases_including_resize():
    from legacy import xla_clusters

    steady, first = _graphs("steady"), _graphs("first")
    aliases, unmatched = xla_clusters.alias(steady, first)
    assert unmatched == 0
    assert len(aliases) == len(xla_clusters._clusters(steady)) == 44
    # clusters of the fresh session are numbered after the steady session's: 44 -> 0, ...
    assert all(int(a.split("_")[1]) - 44 == int(b.split("_")[1]) for a, b in aliases.items())
    resize = [c for c, sig in xla_clusters._clusters(steady).items()
              if ("in", "decode/DecodeJpeg") in sig]
    assert resize and aliases[f"cluster_{int(resize[0].split('_')[1]) + 44}"] == resize[0]


def test_a_wrong_position_is_refused():
    """The signature is a real check: aliasing a graph against a shifted copy of itself fails."""
    from legacy import xla_clusters

    steady = _graphs("steady")
    sigs = xla_clusters._clusters(steady)
    ordered = sorted(sigs, key=xla_clusters._key)
    shifted = sum(sigs[a] != sigs[b] for a, b in zip(ordered, ordered[1:] + ordered[:1]))
    assert shifted > len(ordered) // 2
