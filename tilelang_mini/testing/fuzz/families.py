"""The families of generated kernels, by name, and how a case is made from `family:seed`."""
from __future__ import annotations

from .case import Case
from .gen_bits import gen_bits
from .gen_conv import gen_conv
from .gen_gemmsp import gen_gemmsp
from .gen_padvar import gen_padvar
from .draw import RandomDraw
from .gen_control import gen_control
from .gen_developer import gen_developer
from .gen_dialect import gen_dialect
from .gen_cv import gen_cv_combine
from .gen_cube import gen_cube_vector, gen_cvc_chain, gen_gemm, gen_sparse_gemm, gen_vector_cube
from .gen_fitting import gen_fitting
from .gen_flow import gen_flow
from .gen_expert import gen_expert, gen_expert_broken
from .gen_int4 import gen_int4
from .gen_misc import gen_misc
from .gen_invalid import gen_invalid
from .gen_nd import gen_tile_nd
from .gen_scalar import gen_dyn_bounds, gen_gather, gen_grouped_gemm
from .gen_scatter import gen_scatter
from .gen_select import gen_atomic, gen_select
from .gen_eager import gen_eager
from .gen_launch import gen_launches
from .gen_library import gen_library
from .gen_simt import gen_simt
from .gen_tileops import gen_tileops
from .gen_views import gen_views
from .gen_vector import gen_elementwise, gen_reduce, gen_rownorm
from .mutate import STAGES

VALID = {
    "gemm": gen_gemm,
    "elementwise": gen_elementwise,
    "reduce": gen_reduce,
    "rownorm": gen_rownorm,
    "cube_vector": gen_cube_vector,
    "vector_cube": gen_vector_cube,
    "cvc_chain": gen_cvc_chain,
    "sparse_gemm": gen_sparse_gemm,
    "gather": gen_gather,
    "grouped_gemm": gen_grouped_gemm,
    "dyn_bounds": gen_dyn_bounds,
    "control": gen_control,
    "expert": gen_expert,
    "tile_nd": gen_tile_nd,
    "select": gen_select,
    "atomic": gen_atomic,
    "developer": gen_developer,
    "dialect": gen_dialect,
    "flow": gen_flow,
    "int4": gen_int4,
    "fitting": gen_fitting,
    "cv_combine": gen_cv_combine,
    "simt": gen_simt,
    "views": gen_views,
    "launches": gen_launches,
    "eager": gen_eager,
    "scatter": gen_scatter,
    "tileops": gen_tileops,
    "misc": gen_misc,
    "bits": gen_bits,
    "padvar": gen_padvar,
    "conv": gen_conv,
    "gemmsp": gen_gemmsp,
    "library": gen_library,
}
# Relative frequencies in a random mix (the cheap families more often).
WEIGHTS = {"gemm": 4, "elementwise": 4, "reduce": 3, "rownorm": 2, "cube_vector": 3,
           "vector_cube": 2, "cvc_chain": 2, "sparse_gemm": 1, "gather": 2, "grouped_gemm": 1, "dyn_bounds": 2,
           "control": 2, "invalid": 3, "mutation": 4, "args": 2, "expert": 2,
           "expert_broken": 2, "scenario": 1,
           "tile_nd": 2, "select": 3, "atomic": 2, "developer": 3, "dialect": 3, "flow": 3,
           "int4": 3, "fitting": 2, "cv_combine": 3, "simt": 3, "views": 3, "launches": 2, "eager": 2, "scatter": 2, "tileops": 2, "misc": 2,
           "bits": 2, "padvar": 2, "conv": 2, "gemmsp": 1, "library": 2}
FAMILIES = tuple(VALID) + ("expert_broken", "invalid", "mutation", "args", "scenario")
# Kernels whose IR is mutated: small, quick to compile and run.
MUTATION_BASES = ("elementwise", "reduce", "gemm", "cube_vector", "rownorm", "tile_nd", "expert",
                  "select", "atomic", "developer", "flow", "int4")


def generate(d, family: str, seed) -> Case:
    """The case of `family` drawn from `d` (a Draw), labelled with `seed`."""
    if family in VALID:
        return VALID[family](d, seed)
    if family == "expert_broken":
        return gen_expert_broken(d, seed)
    if family == "invalid":
        return gen_invalid(d, seed)
    if family == "mutation":
        base = generate(d, d.choice(MUTATION_BASES), seed)
        base.features = sorted(set(base.features) | {f"base_{base.family}", "mutation"})
        base.family = "mutation"
        base.mutation = {"stage": d.choice(STAGES), "seed": f"{seed}:{d.int(0, 10 ** 6)}"}
        return base
    if family == "args":
        from .badargs import KINDS
        base = generate(d, d.choice(("elementwise", "reduce", "gemm", "gather", "dialect",
                                     "developer")), seed)
        n_in = len([t for t in base.tensors if not t.output])
        base.call = {"kind": d.choice(KINDS), "index": d.int(0, n_in - 1)}
        base.features = sorted(set(base.features) | {f"base_{base.family}", "args",
                                                     f"args_{base.call['kind']}"})
        base.family = "args"
        return base
    if family == "scenario":  # a kernel run under fork / pool / threads / a spoiled cache
        from .scenarios import draw_scenario
        bases = ("elementwise", "reduce", "gemm", "rownorm", "gather")
        base = generate(d, d.choice(bases), seed)
        base.scenario = draw_scenario(d)
        if base.scenario["kind"] == "cache":  # a second kernel: entries of two keys
            base.scenario["others"] = [generate(d, d.choice(bases), f"{seed}-other").to_json()]
        base.features = sorted(set(base.features) | {f"base_{base.family}", "scenario",
                                                     f"scenario_{base.scenario['kind']}"})
        base.family = "scenario"
        return base
    raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")


def make_case(family: str, seed) -> Case:
    """The case `family:seed`, the same on every machine and run."""
    return generate(RandomDraw(f"{family}:{seed}"), family, seed)
