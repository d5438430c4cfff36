"""`walk` (ir/nodes.py) reads only the fields of a node whose declared type may hold nodes (a
field declared str, int, bool, float or a tuple of them is skipped): on every example kernel, at
every stage of both targets' pass lists, it visits exactly the nodes, in the order, of a walk
that reads every field."""
from __future__ import annotations

from dataclasses import fields, is_dataclass

import pytest

from tilelang_mini.ir.nodes import Loc, walk
from tilelang_mini.runtime.kernel import pass_options
from tilelang_mini.transform.options import Options
from tilelang_mini.transform.pipeline import run_pipeline

from kernels import from_example


def every_field_walk(node):
    """Parents first, fields in declaration order, tuples flattened: every field read."""
    out = [node]

    def value(v):
        if isinstance(v, tuple):
            for x in v:
                value(x)
        elif is_dataclass(v) and not isinstance(v, (type, Loc)):
            out.extend(every_field_walk(v))

    for f in fields(node):
        if f.name != "loc":
            value(getattr(node, f.name))
    return out


CASES = [("flash_attention", "flash_attention", (1, 40, 32)),
         ("prenorm", "hc_prenorm", (40, 24, 300)),
         ("gemm", "matmul", (64, 48, 40)),
         ("rmsnorm", "rms_norm", (64, 96))]


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("stem, attr, args", CASES, ids=[c[0] for c in CASES])
def test_walk_visits_every_node(stem, attr, args, target):
    kernel = from_example(stem, attr)(*args).ir
    comp = run_pipeline(kernel, pass_options(Options(target=target)))
    assert len(comp.stages) > 3
    for stage, k in comp.stages.items():
        got, want = list(walk(k)), every_field_walk(k)
        assert len(got) == len(want), stage
        assert all(a is b for a, b in zip(got, want)), stage
