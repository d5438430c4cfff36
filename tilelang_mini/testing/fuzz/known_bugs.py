"""Known open compiler bugs the fuzzer finds, each with its reproduction in /work/notes/findings
(the project's issue tracker notes). A failing step that matches an entry is reported as
`known:<id>` and does not fail the CI profile; everything else fails it. The long profile reports
both. Remove an entry when its bug is fixed (the CI profile then checks the fix).

An entry matches a step when the case has one of its `features` (or `families`), the step is
one of its `steps` (all when empty), the outcome is one of its `outcomes`, and `detail` (a
regex, optional) is found in the outcome's detail.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownBug:
    id: str
    finding: str                 # findings file (and heading) with the reproduction
    features: tuple = ()
    families: tuple = ()
    steps: tuple = ()
    outcomes: tuple = ("mismatch", "internal", "crash", "hang", "race", "rejected")
    detail: str = ""


KNOWN_BUGS: tuple[KnownBug, ...] = (
)


def match_known(case, step: str, outcome: str, detail: str) -> str | None:
    """The id of the first KNOWN_BUGS entry that explains this outcome, or None."""
    feats = set(case.features)
    for bug in KNOWN_BUGS:
        if bug.features and not feats & set(bug.features):
            continue
        if bug.families and case.family not in bug.families:
            continue
        if bug.steps and step not in bug.steps:
            continue
        if outcome not in bug.outcomes:
            continue
        if bug.detail and not re.search(bug.detail, detail):
            continue
        return bug.id
    return None
