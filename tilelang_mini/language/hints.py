"""GPU scheduling hints TileLang kernels carry: accepted, and meaningless on this machine.

`T.use_swizzle(...)`, `T.annotate_layout(...)`, `T.func_attr(...)`, `T.no_set_max_nreg()`, ... are
statements the frontend accepts and drops (docs/tilelang_compat.md lists them); `policy=` and
`threads=` arguments likewise. `T.GemmWarpPolicy` is a plain enum so that factory code using it runs.
"""
from __future__ import annotations

import enum


class GemmWarpPolicy(enum.IntEnum):
    """How TileLang splits a GEMM tile over GPU warps; the cube unit has no warps (ignored)."""

    Square = 0
    FullRow = 1
    FullCol = 2

    def compute_warp_partition(self, M: int, N: int, num_warps: int) -> tuple:
        """(m_warp, n_warp), m_warp * n_warp == num_warps: FullRow puts every warp along M,
        FullCol along N, Square takes the split whose per-warp tile is nearest to square
        (host code of the intrinsic-emitter examples, which then fail at the emitter)."""
        if self is GemmWarpPolicy.FullRow:
            return num_warps, 1
        if self is GemmWarpPolicy.FullCol:
            return 1, num_warps
        splits = [(m, num_warps // m) for m in range(1, num_warps + 1) if num_warps % m == 0]
        return min(splits, key=lambda s: abs(M / s[0] - N / s[1]))


# Statements that are GPU hints: accepted and ignored inside kernels.
HINT_NAMES = (
    "use_swizzle", "annotate_layout", "func_attr", "no_set_max_nreg", "set_max_nreg",
    "disable_warp_group_reg_alloc", "annotate_producer_reg_dealloc",
    "annotate_consumer_reg_alloc", "sync_threads", "annotate_address", "assume",
    "annotate_l2_hit_ratio", "annotate_safe_value", "annotate_restrict_buffers",
    # device debug output (tilelang-ascend's T.printf / T.dump_tensor under TL_PTO_DEBUG,
    # TileLang's T.print): accepted and not printed; kernel.simulate(...) or the numpy target
    # show the values
    "printf", "dump_tensor", "print",
)

# Trace events (TileLang's tools.cuda.iket): `iket.mark(...)` statements and `iket.range(...)`
# with-items, accepted and recorded as hints like the ones above (they change no value).
TRACE_EVENTS = ("iket.mark", "iket.range")

# GPU-only constructs whose meaning this machine cannot reproduce: name -> what to write instead.
GPU_ONLY = {
    "alloc_barrier": "Ascend pipes synchronise with flags: leave sync to the compiler (developer "
                     "mode) or write T.set_flag/T.wait_flag in T.Scope blocks (expert mode)",
    "mbarrier_wait_parity": "T.wait_flag(src_pipe, dst_pipe, id) (expert mode) or nothing "
                            "(developer mode inserts the sync)",
    "mbarrier_arrive": "T.set_flag(src_pipe, dst_pipe, id) (expert mode) or nothing",
    "barrier_wait": "T.wait_flag / T.wait_cross_flag (expert mode) or nothing",
    "barrier_arrive": "T.set_flag / T.set_cross_flag (expert mode) or nothing",
    "tma_copy": "T.copy (the MTE2 pipe moves GM tiles)",
    "alloc_tmem": "T.alloc_fragment or T.alloc_L0C for the accumulator",
    "tcgen05_gemm": "T.gemm", "tcgen05_mma_arrive": "nothing (the cube unit is synchronous)",
    "wgmma_gemm": "T.gemm", "wait_wgmma": "nothing (the cube unit is synchronous)",
    "alloc_cluster_barrier": "T.set_cross_flag/T.wait_cross_flag between cube and vector cores",
    "ClusterKernel": "T.Kernel", "block_rank_in_cluster": "the T.Kernel variables",
    "ptx_cp_async": "T.copy", "cp_async_barrier_noinc": "nothing",
    "fence_proxy_async": "nothing", "call_extern": "T. operations",
    "import_source": "T. operations", "tvm_thread_allreduce": "T.reduce_sum / T.reduce_max",
    "dp4a": "T.gemm on int8 tiles", "PersistentTileScheduler": "a T.serial loop over tiles "
    "inside T.Kernel(n_cores, is_npu=True)",
    "ws": "T.Scope('C')/T.Scope('V') (expert mode)", "annotate_ws_schedule": "T.Scope blocks",
    "WSSchedule": "T.Scope blocks", "WSRole": "T.Scope blocks", "WSPipeline": "T.Pipelined",
    "access_ptr": "buffer regions (A[i:i+n, :]) in T.copy",
    "ptr": "the tensors as kernel parameters (a grouped kernel takes one concatenated tensor "
           "and per-group offsets, as grouped_gemm_fwd)",
    "make_tensor": "the tensors as kernel parameters (one concatenated tensor and per-group "
                   "offsets, as grouped_gemm_fwd)",
    "any_sync": "a reduction over the tile (T.reduce_max of the condition as 0/1) and a "
                "run-time `if` on its element",
    "tvm_warp_shuffle": "T.reduce_* or T.Parallel over the tile",
    "mma_gemm_blockscaled": "T.gemm on widened (bfloat16) tiles with the scales applied by "
                            "a T.Parallel map",
}

# Families of GPU-only names (TileLang's Blackwell/Hopper intrinsics and warp specialisation):
# prefix -> what to write instead.
GPU_ONLY_PREFIXES = {
    "tcgen05_": "T.gemm (the cube unit) and T.alloc_fragment/T.alloc_L0C for the accumulator",
    "wgmma_": "T.gemm", "mbarrier_": "flags: nothing in developer mode, T.set_flag/T.wait_flag "
    "in expert mode", "tma_": "T.copy", "ptx_": "T. operations", "cp_async": "T.copy",
    "WS": "T.Scope('C')/T.Scope('V') (expert mode) or developer mode (the compiler splits "
    "cube and vector work)", "ws_": "T.Scope blocks",
    "warp_": "T.Parallel over the tile", "shfl": "T.reduce_* over a tile",
    "clc_": "a T.serial loop over tiles inside T.Kernel(n_cores, is_npu=True) (static "
            "persistent scheduling)",
}

# tilelang-ascend's multi-device communication (aclshmem: one NPU's kernel reading or writing
# another NPU's memory): prefix -> what to write instead. The machine model is one device.
MULTI_DEVICE_PREFIXES = {
    "shmem_": "the transfer between devices in host code (one kernel per device, its inputs "
              "and outputs moved by the host)",
}

# Portable TileLang features not supported yet: name -> what to write instead.
NOT_YET = {
    "comm_reducer": "T.reduce_sum / T.reduce_max", "evaluate": "a T. operation statement",
    "attr": "nothing (TVM attributes have no meaning here)",
    "atomic_load": "a plain read of the GM element (T.sync_all between the writing launch "
                   "and the reading one)",
    "atomic_store": "a plain store (one core writes the element)",
    "device_assert": "nothing (check the inputs in host code: kernels have no device assert)",
    "index_to_coordinates": "index // n and index % n",
}
