"""Host-side helpers under TileLang's import paths (`tilelang.utils.tensor`)."""
