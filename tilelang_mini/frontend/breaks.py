"""`break` in a kernel loop: a flag that guards what follows it (a `for` loop's trip count is
known when it starts, so the remaining iterations run and do nothing; a run-time `while` loop
also tests the flag in its condition, so it stops: control.py `runtime_while`).

    for r in T.serial(4):                    brk = 0
        if n <= 0:                           for r in T.serial(4):
            break                    ->          if brk == 0:
        A                                            if n <= 0:
                                                         brk = 1
                                                     if brk == 0:
                                                         A

Once the flag is set nothing the loop body holds runs again, so the statements after the
`break` in its branch are dead, those after the statement holding it are guarded, and the
later iterations are guarded as a whole. A `break` of a nested loop is that loop's own.
"""
from __future__ import annotations

import ast

FLAG = "__tlm_break_flag"


def has_break(stmts) -> bool:
    """Whether `stmts` hold a `break` of the loop they are the body of."""
    for s in stmts:
        if isinstance(s, ast.Break):
            return True
        if isinstance(s, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.Lambda)):
            continue
        if isinstance(s, ast.If) and (has_break(s.body) or has_break(s.orelse)):
            return True
        if isinstance(s, ast.With) and has_break(s.body):
            return True
    return False


def guarded_body(body: list, flag: str) -> list:
    """The loop body with `break` as `flag = 1` and what follows a possible break guarded
    by `if flag == 0:` (the whole body too, for the iterations after the break)."""
    return [_located(ast.If(test=cleared(flag, body[0]), body=_guarded(body, flag), orelse=[]),
                     body[0])]


def _guarded(stmts: list, flag: str) -> list:
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Break):
            out.append(_located(ast.Assign(targets=[_located(ast.Name(flag, ast.Store()), s)],
                                           value=_located(ast.Constant(1), s)), s))
            return out  # the rest of this branch is dead
        if not has_break([s]):
            out.append(s)
            continue
        if isinstance(s, ast.If):
            s = _located(ast.If(test=s.test, body=_guarded(s.body, flag),
                                orelse=_guarded(s.orelse, flag)), s)
        else:  # a `with` block holding the break
            s = _located(ast.With(items=s.items, body=_guarded(s.body, flag)), s)
        out.append(s)
        rest = stmts[i + 1:]
        if rest:
            out.append(_located(ast.If(test=cleared(flag, rest[0]), body=_guarded(rest, flag),
                                       orelse=[]), rest[0]))
        return out
    return out


def cleared(flag: str, where) -> ast.expr:
    """`flag == 0` (no `break` yet), at the source position of `where`."""
    return _located(ast.Compare(left=_located(ast.Name(flag, ast.Load()), where),
                                ops=[ast.Eq()], comparators=[_located(ast.Constant(0), where)]),
                    where)


def _located(node, where):
    """`node` at the source position of `where` (errors point at the user's line)."""
    return ast.copy_location(node, where)
