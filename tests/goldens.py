"""Golden files under tests/golden/: a missing or different golden fails the test; only
`pytest --update-goldens` (set in conftest.py) writes them."""
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = False  # set by conftest.py from the --update-goldens option


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.ir"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing (`pytest --update-goldens` writes it)"
    assert text == path.read_text(), f"{path} differs (`pytest --update-goldens` refreshes it)"
