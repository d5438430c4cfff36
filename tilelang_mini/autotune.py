"""Model-driven autotuning: search tile sizes and stages by the estimate or by measurement.

    result = tilelang_mini.autotune(matmul, [dict(block_M=128, block_N=256, num_stages=2), ...],
                                    by="estimate", chip="ascend950", args=(4096, 7168, 16384))
    result.best.config, result.best.time_us, print(result.table())

* `by="estimate"`: compile each configuration (numpy target, no code generation) and take the
  performance model's estimate of the launch on `chip` (`JITKernel.estimate`): no data, a
  fraction of a second per configuration.
* `by="measure"`: compile for the llvm backend and time the median of `repeat` runs on random
  inputs (after `warmup` runs).

Configurations that do not compile (a tile that does not fit the chip's L1/L0/UB, an alignment
error: a CompileError from the memory planner) are recorded as skipped, with the message. The
factory's default configuration is evaluated too (unless one of `configs` is it), so the best
configuration is never worse than the default by the same measure. Long searches draw a progress
line on stderr.
"""
from __future__ import annotations

import inspect
import itertools
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .errors import TileLangMiniError

BY = ("estimate", "measure")


@dataclass
class TuneEntry:
    config: dict
    status: str                     # "ok" or "skipped"
    time_us: float | None = None    # the figure: estimated or measured (median) time
    tflops: float | None = None
    reason: str = ""                # why it was skipped
    default: bool = False           # the factory's default configuration
    same_as: str = ""               # the label of an earlier configuration of the same kernel
    kernel: object = field(default=None, repr=False)
    estimate: object = field(default=None, repr=False)

    def label(self) -> str:
        cfg = ", ".join(f"{k}={v}" for k, v in self.config.items()) or "(defaults)"
        return cfg + (" [default]" if self.default and self.config else "")


@dataclass
class AutotuneResult:
    by: str
    chip: str
    entries: list                   # every configuration, in search order
    seconds: float = 0.0

    @property
    def ok(self) -> list:
        return [e for e in self.entries if e.status == "ok"]

    @property
    def skipped(self) -> list:
        return [e for e in self.entries if e.status == "skipped"]

    @property
    def best(self) -> TuneEntry:
        return min(self.ok, key=lambda e: e.time_us)

    @property
    def best_config(self) -> dict:
        return dict(self.best.config)

    @property
    def best_kernel(self):
        return self.best.kernel

    # TileLang's AutotuneResult fields (`result.kernel`, `.config`, `.latency` in ms)
    @property
    def kernel(self):
        return self.best_kernel

    @property
    def config(self) -> dict:
        return self.best_config

    @property
    def latency(self) -> float:
        return self.best.time_us / 1e3

    ref_latency = None

    @property
    def default(self) -> TuneEntry | None:
        return next((e for e in self.entries if e.default), None)

    def table(self) -> str:
        what = "estimated" if self.by == "estimate" else "measured (median)"
        lines = [f"autotune by {self.by} on {self.chip}: {len(self.ok)} ran, "
                 f"{len(self.skipped)} skipped, {self.seconds:.1f} s"]
        best = self.best if self.ok else None
        for e in sorted(self.entries, key=lambda e: (e.status != "ok", e.time_us or 0.0)):
            mark = "*" if e is best else " "
            if e.status == "ok":
                tf = f"  {e.tflops:7.1f} TFLOP/s" if e.tflops else ""
                same = f"  (the kernel of {e.same_as})" if e.same_as else ""
                lines.append(f" {mark} {e.time_us:12.1f} us{tf}  {e.label()}{same}")
            else:
                lines.append(f"   {'skipped':>15}  {e.label()}: {e.reason}")
        lines.append(f"(time: {what}; * best)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _expand(configs) -> list[dict]:
    if isinstance(configs, dict):   # {name: [values]}: the grid
        names = list(configs)
        return [dict(zip(names, vals)) for vals in itertools.product(*(configs[n] for n in names))]
    out = []
    for c in configs:
        if not isinstance(c, dict):
            raise TypeError(f"autotune configs are dicts of factory keyword arguments, got {c!r}")
        out.append(dict(c))
    return out


# keys of a TileLang configuration that are jit options, not factory arguments (TileLang's
# example_gemm_autotune_pass_configs tunes `pass_configs`); here they have no effect (hints, see
# docs/tilelang_compat.md), so they are dropped from the factory call and kept in the config
COMPILE_KEYS = ("pass_configs", "compile_flags", "execution_backend", "target_host")


def _factory_args(cfg: dict) -> dict:
    """A configuration's factory keyword arguments: `cfg` without COMPILE_KEYS."""
    return {k: v for k, v in cfg.items() if k not in COMPILE_KEYS}


def _defaults(fn) -> dict:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in sig.parameters.items() if p.default is not p.empty}


class _Progress:
    """`[autotune] [#####-----] 5/10 best 123.4 us` on stderr, redrawn in place. With
    enabled=None it appears once the search has run for a second."""

    def __init__(self, total: int, enabled):
        self.total = total
        self.enabled = enabled
        self.start = time.perf_counter()
        self.drawn = False

    def update(self, done: int, best) -> None:
        elapsed = time.perf_counter() - self.start
        if self.enabled is False or (self.enabled is None and (elapsed < 1.0 or self.total < 2)):
            return
        width = 24
        fill = width * done // max(1, self.total)
        b = f"best {best:.1f} us" if best is not None else "best -"
        sys.stderr.write(f"\r[autotune] [{'#' * fill}{'-' * (width - fill)}] {done}/{self.total} "
                         f"{b}  {elapsed:.1f} s ")
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _random_inputs(kernel, seed: int) -> list:
    from .ir import dtypes
    rng = np.random.default_rng(seed)
    out = []
    for b in kernel.inputs:
        dt = dtypes.to_numpy(b.dtype)
        # drawn in the narrowest type the generator has (float32 normals: a third of the time
        # of float64 ones and their cast, which matters at the examples' own sizes)
        if np.issubdtype(dt, np.integer):
            out.append(rng.integers(0, 8, size=b.shape, dtype=dt))
        elif dt == np.bool_:
            out.append(rng.integers(0, 2, size=b.shape, dtype=dt))
        else:
            out.append(rng.standard_normal(b.shape, dtype=np.float32).astype(dt, copy=False))
    return out


def _measure(kernel, repeat: int, warmup: int, seed: int) -> float:
    inputs = _random_inputs(kernel, seed)
    for _ in range(warmup):
        kernel(*inputs)
    times = []
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        kernel(*inputs)
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e6


def _call_configs(fn, args, kwargs):
    """configs=f: TileLang calls f(key_args, key_kwargs); simpler ones take the arguments."""
    for call in (lambda: fn(args, kwargs), lambda: fn(args), lambda: fn(*args, **kwargs), fn):
        try:
            return call()
        except TypeError:
            continue
    raise TypeError(f"autotune configs function {getattr(fn, '__name__', fn)} could not be "
                    "called with the kernel's arguments")


class AutoTuned:
    """TileLang's decorator form, `@autotune(configs=..., warmup=..., rep=...)` above `@jit`:
    calling it with the shared arguments tunes (memoised per arguments) and returns the best
    configuration's kernel, compiled for the default target, with `.config` and `.latency`
    (milliseconds: estimated or measured) and `.autotune_result`."""

    def __init__(self, factory, configs, by, chip, repeat, warmup):
        self.factory, self.configs, self.by, self.chip = factory, configs, by, chip
        self.repeat, self.warmup = repeat, warmup
        self._cache: dict = {}

    def __call__(self, *args, **kwargs):
        configs = self.configs
        if callable(configs):  # TileLang also takes a function returning the configurations
            configs = _call_configs(configs, args, kwargs)
        fn = getattr(self.factory, "factory", self.factory)
        try:
            given = set(inspect.signature(fn).bind_partial(*args, **kwargs).arguments)
        except TypeError:
            given = set(kwargs)
        names = {k for c in _expand(configs) for k in _factory_args(c)}
        if names and names <= given:  # every tuned argument given: no search
            return self.factory(*args, **kwargs)
        from .runtime.eager import EagerJIT
        if isinstance(self.factory, EagerJIT):  # tune, then run the best kernel on the arrays
            kernel = self._eager_best(configs, lambda target=None, **c: self.factory.kernel_for(
                *args, target=target, **{**c, **kwargs}))  # what the caller gives wins
            return kernel(*self._eager_args)
        key = (args, tuple(sorted(kwargs.items())))
        if key not in self._cache:
            result = autotune(self.factory, configs, by=self.by, chip=self.chip, args=args,
                              kwargs=kwargs, repeat=self.repeat, warmup=self.warmup)
            kernel = self.factory(*args, **kwargs, **_factory_args(result.best_config))
            if not hasattr(kernel, "estimate"):
                from .runtime.kernel import compile as tl_compile
                kernel = tl_compile(kernel)
            kernel.config = {**_defaults(getattr(self.factory, "factory", self.factory)),
                             **result.best_config}
            kernel.latency = result.best.time_us / 1e3
            kernel.autotune_result = result
            self._cache[key] = kernel
        return self._cache[key]


def _eager_tune(self, configs, make):
    """Compile each configuration of an eager jit function for the estimate (numpy target),
    take the fastest, compile it for the default target; `.config`/`.latency` as above."""
    best = None
    reasons, errors = [], []
    seen: dict = {}  # kernel identity -> its estimate (configurations of one kernel: one figure)
    for cfg in [{}] + _expand(configs):
        try:
            kernel, call_args = make(target="numpy", **cfg)
            ident = _identity(kernel)
            t = seen[ident] if ident in seen else kernel.estimate(self.chip).time_us
            seen[ident] = t
        except (TileLangMiniError, TypeError, ValueError) as e:
            reasons.append(f"{cfg}: {_first_line(e)}")
            errors.append(e)
            continue
        if best is None or t < best[0]:
            best = (t, cfg)
    if best is None:
        _raise_common(errors)
        raise TileLangMiniError("autotune: no configuration compiled (" + "; ".join(reasons) + ")")
    kernel, self._eager_args = make(**best[1])
    kernel.config = dict(best[1])
    kernel.latency = best[0] / 1e3
    return kernel


AutoTuned._eager_best = _eager_tune


def _autotuned_compile(self, **kwargs):
    """`f.compile(M=..., ...)` on an autotuned eager function: the best configuration's kernel;
    the kernel of the given values, untuned, when every tuned argument is given (TileLang's
    rule, as for a call), the given ones winning over a configuration's otherwise."""
    configs = self.configs() if callable(self.configs) else self.configs
    names = {k for c in _expand(configs) for k in _factory_args(c)}
    if names and names <= set(kwargs):
        kernel = self.factory.compile(**kwargs)
        kernel.config = {k: kwargs[k] for k in sorted(names)}
        return kernel
    return self._eager_best(configs, lambda target=None, **c: (
        self.factory.compile(target=target, **{**c, **kwargs}), []))


AutoTuned.compile = _autotuned_compile


class AutoTuner:
    """TileLang's API form: `AutoTuner.from_kernel(kernel=f, configs=[...])
    .set_compile_args(out_idx=..., target=...).set_profile_args(...).run(warmup=, rep=)` returns
    the AutotuneResult whose `.kernel` is the best configuration compiled for the default target
    (`.config`, `.latency` in ms). `f` returns a `T.prim_func` for keyword arguments of a
    configuration. Profile options (supply_type, ref_prog, skip_check, ...) and run options
    (early_stop, enable_grouped_compile, ...) are accepted: configurations are ranked by the
    estimate (or measured with `by="measure"`), not checked against a reference."""

    def __init__(self, fn=None, configs=None, by: str = "estimate", chip: str | None = None):
        self.fn, self.configs, self.by, self.chip = fn, configs, by, chip
        self.compile_args: dict = {}
        self.profile_args: dict = {}

    @classmethod
    def from_kernel(cls, kernel, configs, **kw):
        return cls(kernel, configs, **kw)

    def set_compile_args(self, out_idx=None, target=None, **_ignored):
        self.compile_args = {"out_idx": out_idx, "target": target}
        return self

    def set_profile_args(self, **kw):
        self.profile_args = kw
        return self

    def run(self, warmup: int = 1, rep: int = 5, **_ignored) -> AutotuneResult:
        from .runtime.kernel import compile as tl_compile
        configs = self.configs() if callable(self.configs) else self.configs
        result = autotune(self.fn, configs, by=self.by, chip=self.chip,
                          out_idx=self.compile_args.get("out_idx"), repeat=rep, warmup=warmup,
                          include_default=False)
        best = result.best
        target = self.compile_args.get("target")
        target = target if target in ("numpy", "llvm") else None  # GPU targets: the default
        best.kernel = tl_compile(self.fn(**_factory_args(best.config)),
                                 out_idx=self.compile_args.get("out_idx"), target=target)
        return result


def autotune(factory=None, configs=None, by: str = "estimate", chip: str | None = None, *, args=(),
             kwargs=None, out_idx=None, repeat: int = 5, warmup: int = 1, seed: int = 0,
             include_default: bool = True, progress=None, rep: int | None = None,
             **tilelang_options) -> AutotuneResult:
    """Search `configs` (a list of dicts of the factory's keyword arguments, or a dict of
    lists: their product) for the fastest kernel, by the estimate or by measurement.

    `factory` is a `@tilelang_mini.jit` factory or a function returning a `T.prim_func`;
    `args`/`kwargs` are the arguments every configuration shares (e.g. the problem shape);
    `out_idx` is taken from the jit factory unless given. Returns an `AutotuneResult` listing
    every configuration with its figure (time_us) or the reason it was skipped."""
    from .runtime import config as rt_config
    from .runtime.kernel import JITFactory, JITKernel, compile as tl_compile
    repeat = rep if rep is not None else repeat
    if factory is None or (configs is None and not callable(factory)):
        # decorator form; TileLang's timeout/skip_check/... options have no meaning here
        cfgs = configs if configs is not None else factory
        return lambda f: AutoTuned(f, cfgs, by, chip, repeat, warmup)
    if configs is None:
        raise TypeError("autotune needs configs (a list of dicts or a dict of lists)")
    if by not in BY:
        raise ValueError(f"autotune by={by!r}: use 'estimate' or 'measure'")
    chip = chip or rt_config.default_chip()
    target = "numpy" if by == "estimate" else "llvm"
    kwargs = dict(kwargs or {})
    if isinstance(factory, JITFactory):
        fn, out_idx = factory.factory, (out_idx if out_idx is not None else factory.out_idx)
    else:
        fn = factory
    todo = _expand(configs)
    defaults = _defaults(fn)
    is_default = [all(k in defaults and defaults[k] == v for k, v in c.items()) for c in todo]
    if include_default and not any(is_default):
        todo.insert(0, {})
        is_default.insert(0, True)

    entries: list[TuneEntry] = []
    errors: list = []
    seen: dict = {}                 # a configuration's kernel identity -> its entry
    bar = _Progress(len(todo), progress)
    start = time.perf_counter()
    best = None
    try:
        for i, (cfg, dflt) in enumerate(zip(todo, is_default)):
            entry = TuneEntry(config=cfg, status="skipped", default=dflt)
            try:
                built = fn(*args, **kwargs, **_factory_args(cfg))
                ident = _identity(built)
                if ident in seen:  # the kernel of an earlier configuration: its figure
                    _same(entry, seen[ident])
                    entries.append(entry)
                    bar.update(i + 1, best)
                    continue
                if ident is not None:
                    seen[ident] = entry  # its outcome too (a compile error is the same)
                if isinstance(built, JITKernel):
                    kernel = built
                else:
                    kernel = tl_compile(built, out_idx=out_idx, target=target, chip=chip)
                entry.kernel = kernel
                est = kernel.estimate(chip) if by == "estimate" else None
                if est is not None:
                    entry.estimate = est
                    entry.time_us = est.time_us
                    entry.tflops = est.tflops or None
                else:
                    entry.time_us = _measure(kernel, repeat, warmup, seed)
                entry.status = "ok"
            except TileLangMiniError as e:
                entry.reason = _first_line(e)
                errors.append(e)
            except (TypeError, ValueError) as e:
                entry.reason = f"{type(e).__name__}: {e}"
                errors.append(e)
            entries.append(entry)
            if entry.status == "ok" and (best is None or entry.time_us < best):
                best = entry.time_us
            bar.update(i + 1, best)
    finally:
        bar.close()
    result = AutotuneResult(by=by, chip=chip, entries=entries,
                            seconds=time.perf_counter() - start)
    if not result.ok:
        _raise_common(errors)
        reasons = "; ".join(f"{e.label()}: {e.reason}" for e in entries)
        raise TileLangMiniError(f"autotune: no configuration compiled ({reasons})")
    return result


def _identity(built):
    """What makes a configuration's kernel: the traced IR without its GPU hints (`key_text`),
    and the compile options of an already compiled kernel; None when `built` is neither.
    Configurations that differ only in hints (TileLang's threads=128 / 256, which mean
    nothing here) or in arguments the kernel does not use are one kernel: compiled once and
    reported with one figure."""
    from .runtime.kernel import JITKernel, key_text
    if isinstance(built, JITKernel):
        return (key_text(built.frontend), built.out_idx, built.workspace_idx, repr(built.options))
    launches = getattr(built, "launches", None)
    if not launches:
        return None
    return (tuple(key_text(k) for k in launches), repr(getattr(built, "hidden", ())))


def _same(entry: TuneEntry, first: TuneEntry) -> None:
    """`entry` is the kernel of `first`: the same outcome and figure (not evaluated again)."""
    entry.status, entry.reason = first.status, first.reason
    entry.time_us, entry.tflops = first.time_us, first.tflops
    entry.kernel, entry.estimate = first.kernel, first.estimate
    entry.same_as = first.label()


def _first_line(e: Exception) -> str:
    """An error's first line (its type's name when it has no message): a failure's reason."""
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _raise_common(errors) -> None:
    """When every configuration failed with the same compile error (the kernel's own: an
    unsupported construct at its line, whatever the tile sizes), raise that error itself, with
    its location and type, rather than autotune's summary of the failures."""
    if errors and all(isinstance(e, TileLangMiniError) for e in errors) and \
            len({_first_line(e) for e in errors}) == 1:
        raise errors[0]


__all__ = ["autotune", "AutoTuned", "AutoTuner", "AutotuneResult", "TuneEntry"]
