"""TileLang's `tilelang.carver` names that example host code reads (the GPU architecture
helpers): only `carver.arch.driver.get_num_sms()`, answered for the NPU (docs/tilelang_compat.md)."""
