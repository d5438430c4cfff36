"""TileLang's `tilelang.tileop` package: the names its examples import from it."""
