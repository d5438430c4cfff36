"""Options: what a compile is for, as the passes receive it (its own module, so the runtime can
build a cache key from it without loading every pass)."""
from __future__ import annotations

from dataclasses import dataclass

from ..arch.presets import DEFAULT_CHIP

DEFAULT_TARGET = "numpy"  # a compile that names no target (TILELANG_MINI_TARGET overrides)


@dataclass(frozen=True)
class Options:
    """What a compile is for: the chip preset and the target backend."""

    chip: str = DEFAULT_CHIP
    target: str = DEFAULT_TARGET
    expert: bool = False  # the kernel places its own scopes and flags (set by run_pipeline)
    # tilelang-ascend's pass config TL_ASCEND_AUTO_SYNC on an expert kernel: the compiler places
    # the flags between the pipes of each core (the kernel's own intra-core flags and barriers
    # are replaced by them; its cross-core flags are kept)
    auto_sync: bool = False
    # tilelang-ascend's jit(target="pto"): its PTO code generator emits set_flag/wait_flag through
    # templates that do nothing for an event id outside 0-7 (src/tl_templates/pto/common.h,
    # set_flag_pipeline): such flags are dropped (check.without_noop_flags), not range errors
    pto: bool = False
    # the llvm host multiplies bfloat16 pairs natively (x86 avx512_bf16): widen_storage keeps
    # on-chip bfloat16 tiles bfloat16 (set from the host by the llvm backend's `pass_options`)
    native_bf16: bool = False


AUTO_SYNC_KEYS = ("TL_ASCEND_AUTO_SYNC", "tl.ascend_auto_sync")


def auto_sync_of(pass_configs) -> bool:
    """Whether a jit's `pass_configs` turn tilelang-ascend's TL_ASCEND_AUTO_SYNC on."""
    return bool(pass_configs) and any(bool(pass_configs.get(k)) for k in AUTO_SYNC_KEYS)
