"""TileLang's `tilelang.tools.cuda`: its in-kernel event tracing (`iket`) has a meaning here."""
