"""torch_npu stand-in: nothing (the NPU is simulated by tilelang_mini)."""
