"""Block classes: which blocks of a lowered kernel run the same instructions (so take the same
cycles), for the estimate to simulate one block per class (docs/performance_model.md).

An instruction's cycles depend only on the statement (tile extents and dtypes), never on where
its regions start, so blocks whose cores take the same control path (loop trip counts, if
outcomes) take the same cycles. Only control flow reading the block id `cid` or data (a `Load`)
can differ between blocks; loops whose bodies hold no such control flow are not entered.

`block_classes` groups the blocks by partitioning them along the control path, all blocks at
once: the walk carries a group of blocks (`cid` is the array of their ids), evaluates each
control expression for the whole group with NumPy and splits the group where the values differ,
then walks on with each part. A kernel of 32768 blocks whose every block reads its group from a
tensor costs a few array operations per control statement, not a walk per block.

Data (zero-filled arguments unless the caller passes others) is read as it is on entry: the
timing-only simulation executes only the scalar unit's own stores, and when one of those writes
a buffer that control flow reads, the partition falls back to one expansion per block
(`timing.TimingModel.control_signature`), which runs them in program order.

Before -> after, an estimate of DeepGEMM's m_grouped contiguous bf16 GEMM (8192 blocks): every
block simulated (hours) -> its blocks in one class after one vectorised walk.
"""
from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np

from ..ir.nodes import Alloc, For, If, Load, Scope, Store, Var, walk, walk_statements


def _reads_data(e) -> bool:
    return any(isinstance(n, Load) for n in walk(e))


def _control_exprs(s):
    if isinstance(s, For) and s.kind != "parallel":
        return s.extents
    if isinstance(s, If):
        return (s.cond,)
    return ()


class _Fallback(Exception):
    """The vectorised walk cannot decide this kernel: use one expansion per block."""


class _Partition:
    def __init__(self, kernel, bufs):
        from .. import semantics
        from .streams import _expr_fn
        self.kernel = kernel
        self.cid, self.vid = kernel.grid_vars
        self.Env = semantics.Env
        self.fn = _expr_fn
        self._dep: dict = {}
        self.data_dependent = any(_reads_data(e) for s in walk_statements(kernel.body)
                                  for e in _control_exprs(s))
        # on-chip buffers control flow reads start zeroed (as the interpreter allocates them)
        self.bufs = dict(bufs)
        read = {n.buffer.name for s in walk_statements(kernel.body) for e in _control_exprs(s)
                for n in walk(e) if isinstance(n, Load)}
        for s in walk_statements(kernel.body):
            if isinstance(s, Alloc) and s.buffer.name in read:
                from ..ir import dtypes
                self.bufs[s.buffer.name] = np.zeros(s.buffer.shape,
                                                    dtypes.to_numpy(s.buffer.dtype))
        # a scalar store to a buffer control flow reads: values change during the walk
        stored = {s.buffer.name for s in walk_statements(kernel.body) if isinstance(s, Store)}
        self.scalar_feedback = bool(stored & read)

    def _expr_dep(self, e) -> bool:
        return any(isinstance(n, Var) and n.name == self.cid for n in walk(e)) or _reads_data(e)

    def body_dep(self, body) -> bool:
        """Does the statement list hold control flow that depends on the block?"""
        key = id(body)
        hit = self._dep.get(key)
        if hit is None:
            hit = any(self._expr_dep(e) for s in walk_statements(body)
                      for e in _control_exprs(s))
            self._dep[key] = hit
        return hit

    def classes(self, n: int) -> dict:
        groups = [np.arange(n, dtype=np.int64)]
        for kind, vid in (("C", 0), ("V", 0), ("V", 1)):
            out = []
            for g in groups:
                env = self.Env({self.cid: g, self.vid: vid}, self.bufs)
                out.extend(e.vars[self.cid] for e in self._walk(self.kernel.body, kind, [env]))
            groups = out
        return {int(g[0]): g.tolist() for g in sorted(groups, key=lambda g: int(g[0]))}

    def _values(self, e, env):
        from .streams import Fault
        try:
            v = np.asarray(self.fn(e)(env))
        except Fault:
            raise _Fallback from None
        size = len(env.vars[self.cid])
        if v.ndim == 0:
            return np.broadcast_to(v, (size,))
        if v.shape != (size,):
            raise _Fallback
        return v

    def _split(self, env, keys):
        """Envs of the parts of env's group with equal keys (rows of `keys`), with the key."""
        blocks = env.vars[self.cid]
        if len(keys) == 1 or (keys == keys[0]).all():
            return [(env, keys[0])]
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        out = []
        for k in range(len(uniq)):
            vars = dict(env.vars)
            vars[self.cid] = blocks[inv == k]
            out.append((self.Env(vars, self.bufs), uniq[k]))
        return out

    def _walk(self, body, kind, envs):
        if not self.body_dep(body):
            return envs
        for s in body:
            if isinstance(s, Scope):
                if s.core == kind:
                    envs = self._walk(s.body, kind, envs)
            elif isinstance(s, For) and s.kind != "parallel":
                if not any(self._expr_dep(e) for e in s.extents) and not self.body_dep(s.body):
                    continue
                if s.kind == "while":  # its trips end on the body's stores: expand per block
                    raise _Fallback
                out = []
                for env in envs:
                    keys = np.stack([self._values(e, env).astype(np.int64) for e in s.extents],
                                    axis=1)
                    for part, exts in self._split(env, keys):
                        out.extend(self._loop(s, kind, part, [int(x) for x in exts]))
                envs = out
            elif isinstance(s, If):
                out = []
                for env in envs:
                    keys = self._values(s.cond, env).astype(bool).reshape(-1, 1)
                    for part, (c,) in self._split(env, keys):
                        out.extend(self._walk(s.then_body if c else s.else_body, kind, [part]))
                envs = out
        return envs

    def _loop(self, s, kind, env, exts):
        if not self.body_dep(s.body) or min(exts, default=1) <= 0:
            return [env]
        envs = [env]
        for idx in itertools.product(*(range(n) for n in exts)):
            for e in envs:
                for name, i in zip(s.vars, idx):
                    e.vars[name] = i
            envs = self._walk(s.body, kind, envs)
        return envs


def block_classes(kernel, model=None) -> dict:
    """representative block -> the blocks that take the same cycles (module docstring).
    `model`: a `timing.TimingModel` whose arguments control flow reads (zeros by default)."""
    n = kernel.grid[0]
    if not n:
        return {}
    if model is None:
        from .. import semantics
        from ..arch import get_chip
        from .simulator import zero_args
        from .timing import TimingModel
        model = TimingModel(kernel, get_chip("ascend910b"),
                            semantics.check_args(kernel, zero_args(kernel)))
    part = _Partition(kernel, model.bufs)
    if not part.body_dep(kernel.body):
        return {0: list(range(n))}
    if not part.scalar_feedback:
        try:
            return part.classes(n)
        except _Fallback:
            pass
    first: dict = {}
    classes: dict = defaultdict(list)
    for b in range(n):
        rep = first.setdefault(model.control_signature(b), b)
        classes[rep].append(b)
    return dict(classes)
