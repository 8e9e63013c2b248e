"""A last shrinking step after Hypothesis: drop buffers the failure does not need.

Hypothesis shrinks the choices it drew; it cannot always undo one whose effect is spread over
later draws, such as an input loaded but never used. This step removes one allocated buffer
at a time together with every kernel statement that mentions it, closed over the other buffers
those statements mention, so no remaining statement can read memory a removed one used to
write. A removal is kept when the case still fails the same way.
"""

from __future__ import annotations

import re
import time

from .case import Case
from .runner import check_case

_ALLOC = re.compile(r"^\s*(\w+) = T\.alloc_\w+\(")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _top_statements(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) line ranges of the statements directly inside the kernel launch."""
    launch = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("with T.Kernel(")), None)
    if launch is None:
        return []
    base = _indent(lines[launch])
    out, i = [], launch + 1
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
        if not lines[i].strip():
            i += 1
            continue
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > _indent(lines[i])):
            end += 1
        out.append((i, end))
        i = end
    return out


def _without(lines: list[str], name: str, stmts: list[tuple[int, int]], names: set) -> list[str] | None:
    """The source lines minus every statement in the closure of `name`, or None if that is all."""
    text = {s: "\n".join(lines[s[0]:s[1]]) for s in stmts}
    mentions = {s: {n for n in names if re.search(rf"\b{n}\b", text[s])} for s in stmts}
    todo, gone_names, gone = [name], set(), set()
    while todo:
        n = todo.pop()
        if n in gone_names:
            continue
        gone_names.add(n)
        for s in stmts:
            if n in mentions[s] and s not in gone:
                gone.add(s)
                todo.extend(mentions[s] - gone_names)
    if len(gone) == len(stmts):
        return None
    drop = {i for s in gone for i in range(*s)}
    return [ln for i, ln in enumerate(lines) if i not in drop]


def minimize(case: Case, target: str, seed: int, status: str, budget_s: float = 120.0) -> Case:
    """The smallest case reachable by dropping buffers that still gives `status` on `target`."""
    deadline = time.monotonic() + budget_s
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        lines = case.source.splitlines()
        stmts = _top_statements(lines)
        names = {m.group(1) for s in stmts if (m := _ALLOC.match(lines[s[0]]))}
        for name in sorted(names):
            if time.monotonic() >= deadline:
                break
            trial_lines = _without(lines, name, stmts, names)
            if trial_lines is None:
                continue
            trial = Case("\n".join(trial_lines) + "\n", case.params, case.features)
            if check_case(trial, target, seed).status == status:
                case, changed = trial, True
                break
    return case
