"""TileLang's T.rng_init / T.rng_rand / T.rng_rand_float (a KernelBuilder part): cuRAND's
Philox4x32-10 stream, as integer arithmetic the vector unit runs.

A block has one generator (TileLang's rand example runs one thread a block). Output g of the
stream with key `seed` and subsequence `seq` is word g % 4 of Philox4x32-10(counter =
(g // 4 as 64 bits, seq as 64 bits), key = seed as 64 bits), as cuRAND's curand_init(seed, seq,
off) + curand() and Triton's randint4x give. `T.rng_init(seed, seq, off)` sets the position
to `off`; each T.rng_rand() draws the next output:

    T.rng_init(seed, 0, off)           ->  rng_seed = seed; rng_seq = 0; rng_pos = off
    for i, j in T.Parallel(1, 128):    ->  rng_pos = rng_pos + 128
        A[idx] = T.rng_rand()              for i, j in parallel(1, 128):
                                               c0..c3 = counter of g = rng_pos - 128 + (i * 128 + j)
                                               ten rounds into lane tiles; A[idx] = word g % 4

Inside a T.Parallel map lane L (row-major over the map's loops) draws output pos + L, whether
or not its statement runs under an `if`, and the map advances the position by its lane count
(one draw a lane: a second T.rng_rand in one map is a located error); outside a map each call
draws one output. The 32-bit products are formed from 16-bit halves, so every intermediate fits
in 64-bit integers on every target. T.rng_rand_float() is cuRAND's uniform float in (0, 1]:
x * 2^-32 + 2^-33 in float32.
"""
from __future__ import annotations

import ast
import math

from ..ir.nodes import Alloc, Buffer, Call, Cast, Load, Store, Var, transform
from .exprs import as_expr, binop, const

_M = (0xD2511F53, 0xCD9E8D57)      # Philox4x32 multipliers
_W = (0x9E3779B9, 0xBB67AE85)      # Weyl key increments
_MASK = 0xFFFFFFFF
_ROUNDS = 10


def mulhilo(m: int, c) -> tuple:
    """(hi, lo) 32-bit words of m * c (m a constant, c < 2^32) from 16-bit halves:
    no intermediate reaches 2^35."""
    mh, ml = m >> 16, m & 0xFFFF
    ch, cl = binop(">>", c, 16), binop("&", c, 0xFFFF)
    low = binop("*", cl, ml)
    mid = binop("+", binop("+", binop("*", cl, mh), binop("*", ch, ml)), binop(">>", low, 16))
    lo = binop("|", binop("<<", binop("&", mid, 0xFFFF), 16), binop("&", low, 0xFFFF))
    hi = binop("+", binop("*", ch, mh), binop(">>", mid, 16))
    return hi, lo


class Rng:
    def op_rng_init(self, call: ast.Call) -> list:
        a = self.args(call, ["seed", "seq", "off", "generator"],
                      {"seq": None, "off": None, "generator": None})
        if "generator" in a and self.eval(a["generator"]) != "curandStatePhilox4_32_10_t":
            raise self.error(a["generator"], "only the Philox4_32_10 generator (the default) "
                                             "is defined here")
        if "seq" not in a:
            raise self.error(call, "T.rng_init(seed, seq, off): pass the subsequence `seq` "
                                   "(by default TileLang takes the GPU thread's id, which a "
                                   "block here does not have)")
        if self.parallel_depth:
            raise self.error(call, "T.rng_init sets the block's generator: call it outside "
                                   "T.Parallel")
        loc = self.loc(call)
        if getattr(self, "rng_state", None) is None:
            vars_ = []
            for role in ("seed", "seq", "pos"):
                buf = Buffer(self.fresh_buffer_name(f"rng_{role}"), (1,), "int64", "var")
                self.hoisted_allocs[buf.name] = Alloc(buf, None, loc)
                vars_.append(buf)
            self.rng_state = tuple(vars_)
            self.rng_maps = []
        values = [self.value_arg(a[k]) if k in a else 0 for k in ("seed", "seq", "off")]
        if self.simt is not None:  # per-thread code: one generator a block needs one thread
            if math.prod(self.simt.extents) != 1:
                raise self.error(call, "T.rng_init in a block of several threads gives each "
                                       "thread a generator; here a block has one: launch with "
                                       "threads=1 and draw one output per T.Parallel lane")
            tx = set(self.simt.names)
            values = [transform(as_expr(v), lambda x: const(0) if isinstance(x, Var) and
                                x.name in tx else x) for v in values]
        return [Store(v, (const(0),), as_expr(Cast("int64", as_expr(x))), loc)
                for v, x in zip(self.rng_state, values)]

    def rng_value(self, name: str, n: ast.Call):
        """The value of T.rng_rand() / T.rng_rand_float(); the statements drawing it go before
        the statement being built."""
        if getattr(self, "rng_state", None) is None:
            raise self.error(n, f"T.{name}() before T.rng_init(seed, seq, off) in this kernel")
        if name == "rng_rand_float":
            a = self.args(n, ["bit", "dist"], {"bit": None, "dist": None})
            if "bit" in a and self.eval(a["bit"]) != 32 or \
                    "dist" in a and self.eval(a["dist"]) != "uniform":
                raise self.error(n, "T.rng_rand_float() gives uniform float32 values here "
                                    "(bit=32, dist=\"uniform\"); there is no float64, and a "
                                    "normal variate is a Box-Muller map of two uniform ones")
        elif n.args or n.keywords:
            raise self.error(n, "T.rng_rand() takes no arguments")
        seed, seq, pos = (Load(v, (const(0),)) for v in self.rng_state)
        loc = self.loc(n)
        if self.parallel_depth:
            loops = self.parallel_loops
            key = tuple(nm for names, _ in loops for nm in names)
            body = self.open_bodies[self.parallel_outer[0] + 1]  # the map's (kept: identity)
            if any(b is body for b in self.rng_maps):
                raise self.error(n, "one T.rng_rand per T.Parallel map (each lane draws one "
                                    "output); draw into a tile in one map and read it in "
                                    "another")
            self.rng_maps.append(body)
            lanes, lane = 1, 0
            for names, exts in loops:
                for nm, e in zip(names, exts):
                    lanes *= e
                    lane = binop("+", binop("*", lane, e), Var(nm))
            shape = tuple(e for _, exts in loops for e in exts)
            at = tuple(Var(nm) for nm in key)
            outer = self.open_bodies[self.parallel_outer[0]]
            outer.append(Store(self.rng_state[2], (const(0),), as_expr(binop("+", pos, lanes)),
                               loc))
            g = binop("+", binop("-", pos, lanes), lane)
        else:
            shape, at = (1,), (const(0),)
            self.open_bodies[-1].append(Store(self.rng_state[2], (const(0),),
                                              as_expr(binop("+", pos, 1)), loc))
            g = binop("-", pos, 1)
        words = self.philox(seed, seq, g, shape, at, loc)
        w = binop("&", g, 3)
        x = Call("select", (as_expr(binop("==", w, 0)), words[0], Call("select", (
            as_expr(binop("==", w, 1)), words[1], Call("select", (
                as_expr(binop("==", w, 2)), words[2], words[3]))))))
        if name == "rng_rand":
            return x
        return binop("+", binop("*", Cast("float32", x), 2.0 ** -32), 2.0 ** -33)

    def philox(self, seed, seq, g, shape, at, loc) -> tuple:
        """Loads of the four output words of Philox4x32-10 for output index g, computed by
        stores into int64 tiles of `shape` at `at` appended to the open statement list."""
        tiles = []
        for k in range(8):
            buf = Buffer(self.fresh_buffer_name(f"rng_w{k}"), shape,
                         "int64", "fragment" if self.parallel_depth else "var")
            self.hoisted_allocs[buf.name] = Alloc(buf, None, loc)
            tiles.append(buf)
        body = self.open_bodies[-1]
        cur, nxt = tiles[:4], tiles[4:]
        init = (binop("&", binop(">>", g, 2), _MASK), binop("&", binop(">>", g, 34), _MASK),
                binop("&", seq, _MASK), binop("&", binop(">>", seq, 32), _MASK))
        body += [Store(t, at, as_expr(v), loc) for t, v in zip(cur, init)]
        for r in range(_ROUNDS):
            c = [Load(t, at) for t in cur]
            k0 = binop("&", binop("+", binop("&", seed, _MASK), r * _W[0]), _MASK)
            k1 = binop("&", binop("+", binop("&", binop(">>", seed, 32), _MASK), r * _W[1]),
                       _MASK)
            hi0, lo0 = mulhilo(_M[0], c[0])
            hi1, lo1 = mulhilo(_M[1], c[2])
            new = (binop("^", binop("^", hi1, c[1]), k0), lo1,
                   binop("^", binop("^", hi0, c[3]), k1), lo0)
            body += [Store(t, at, as_expr(v), loc) for t, v in zip(nxt, new)]
            cur, nxt = nxt, cur
        return tuple(Load(t, at) for t in cur)
