"""TileLang's `tilelang.tools`: developer tools used around kernels (tools.cuda.iket)."""
