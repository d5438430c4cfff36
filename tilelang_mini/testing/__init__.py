"""Testing tools that ship with tilelang_mini: the differential fuzzer (`testing.fuzz`)."""
