"""Search strategies over a constrained :class:`~jupyter_ktune.space.Space`.

A strategy is a small class with ``ask()`` (the next config to evaluate, or None when it has
nothing to propose right now) and ``tell(config, ms)`` (its median time, or None when it failed).
Several configs may be asked before any is told: the sweep keeps compilers and GPUs busy.
Strategies never propose a config twice nor one that breaks a constraint.

Strategies are picked by name from :data:`STRATEGIES` (a registry, not an if/elif chain). The
default, :data:`DEFAULT_STRATEGY`, is chosen by measured efficiency: ``bench/search_efficiency.py``
replays each strategy over spaces recorded exhaustively on the GPU (see
``bench/results/sweeps-h200/README.md``).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from jupyter_ktune.space import COUNT_EXACTLY, SCAN_CONFIGS, Config, Space, SpaceCount

#: the strategy ``tune()`` uses when none is named (decided by bench/search_efficiency.py)
DEFAULT_STRATEGY = "greedy"


class Strategy(Protocol):
    """What the sweep engine needs from a strategy."""

    def ask(self) -> Config | None:
        """Return the next config to evaluate, or None when there is nothing to propose now."""

    def tell(self, config: Config, ms: float | None) -> None:
        """Report a config's median time in ms (None: it failed or is not allowed)."""

    @property
    def exhausted(self) -> bool:
        """True when every valid config has been proposed."""


#: spaces up to this many configs (before constraints) are listed once; larger ones are walked
#: lazily with ``Space.at`` / ``Space.sample``: listing 10**12 configs never ends (issue 21)
LIST_UP_TO = COUNT_EXACTLY


class _Base:
    """Bookkeeping shared by the strategies: the valid configs, what was asked and told.

    ``n_valid`` is exact for a space of up to :data:`LIST_UP_TO` configs and an estimate by
    sampling beyond (``count.exact`` says which); only small spaces are ever listed.
    """

    def __init__(self, space: Space, limits: Mapping[str, Any] | None = None, seed: int = 0):
        self.space, self.limits = space, dict(limits or {})
        self.rng = random.Random(seed)
        self._listed: list[Config] | None = (list(space.configs(self.limits))
                                             if space.size <= LIST_UP_TO else None)
        self.count: SpaceCount = (SpaceCount(len(self._listed), True, space.size)
                                  if self._listed is not None else space.count(self.limits))
        self.asked: set[Config] = set()
        self.told: dict[Config, float | None] = {}
        self.first: list[Config] = []  # tried before the strategy's own order (warm start)

    @property
    def n_valid(self) -> int:
        """How many valid configs the space has (estimated for a large space)."""
        return self.count.n

    @property
    def valid(self) -> list[Config]:
        """The valid configs, listed: only for a space of up to :data:`LIST_UP_TO` configs."""
        if self._listed is None:
            raise ValueError(f"[ktune] the space has {self.space.size:.3g} configs: it is walked "
                             "lazily, never listed. Use n_valid and is_valid().")
        return self._listed

    def is_valid(self, config: Config) -> bool:
        """Whether ``config`` is a config of the space that breaks no constraint."""
        try:
            if any(config[p.name] not in p.values for p in self.space.params) or \
                    len(config) != len(self.space.params):
                return False
        except KeyError:
            return False
        return not self.space.violations(config, self.limits)

    @property
    def exhausted(self) -> bool:
        """True when every valid config has been asked for."""
        return len(self.asked) >= self.n_valid

    def tell(self, config: Config, ms: float | None) -> None:
        """Record a result (also for configs this strategy did not ask for: resumed ones)."""
        self.asked.add(config)
        self.told[config] = ms

    def _take(self, config: Config) -> Config:
        self.asked.add(config)
        return config

    def _first(self) -> Config | None:
        """The next warm-start config (an earlier version's best ones) not yet asked."""
        while self.first:
            c = self.first.pop(0)
            if c not in self.asked and self.is_valid(c):
                return self._take(c)
        return None

    def _random_unasked(self) -> Config | None:
        if self._listed is not None:
            left = [c for c in self._listed if c not in self.asked]
            return self._take(self.rng.choice(left)) if left else None
        for _ in range(SCAN_CONFIGS):  # draws, not a listing; gives up on a near-empty space
            c = self.space.at(self.rng.randrange(self.space.size))
            if c not in self.asked and not self.space.violations(c, self.limits):
                return self._take(c)
        return None

    def best(self) -> tuple[Config, float] | None:
        """Return the fastest config told so far and its time."""
        ok = [(ms, c.key(), c) for c, ms in self.told.items() if ms is not None]
        if not ok:
            return None
        ms, _, c = min(ok)
        return c, ms


class Exhaustive(_Base):
    """Every valid config, in declaration order (first parameter slowest), walked lazily."""

    def __init__(self, space: Space, limits: Mapping[str, Any] | None = None, seed: int = 0):
        super().__init__(space, limits, seed)
        self._walk = iter(self._listed) if self._listed is not None else space.configs(self.limits)

    def ask(self) -> Config | None:
        """Next config in order."""
        first = self._first()
        if first is not None:
            return first
        for c in self._walk:
            if c not in self.asked:
                return self._take(c)
        return None


class RandomSearch(_Base):
    """Valid configs in a seeded random order, without repeats (random draws on a large space)."""

    def __init__(self, space: Space, limits: Mapping[str, Any] | None = None, seed: int = 0):
        super().__init__(space, limits, seed)
        self._order = list(self._listed) if self._listed is not None else None
        if self._order is not None:
            self.rng.shuffle(self._order)

    def ask(self) -> Config | None:
        """Next config of the shuffled order."""
        first = self._first()
        if first is not None:
            return first
        if self._order is None:
            return self._random_unasked()
        for c in self._order:
            if c not in self.asked:
                return self._take(c)
        return None


class GreedyLocal(_Base):
    """Best-first local search over slider neighbours, seeded by a small random sample.

    First ``sample`` random configs (about 3% of the space, 4 to 12); then, repeatedly, the
    untried neighbours (:meth:`Space.neighbours`: one parameter one step away) of the fastest
    config that still has untried neighbours. When every neighbourhood of the measured configs
    is explored, a random config starts a new climb.
    """

    def __init__(self, space: Space, limits: Mapping[str, Any] | None = None, seed: int = 0,
                 sample: int | None = None):
        super().__init__(space, limits, seed)
        n = self.n_valid
        self.sample = sample if sample is not None else max(4, min(12, math.ceil(0.03 * n)))
        self._sampled = 0
        self._neighbours: dict[Config, list[Config]] = {}

    def _untried_neighbours(self, c: Config) -> list[Config]:
        if c not in self._neighbours:
            self._neighbours[c] = self.space.neighbours(c, self.limits)
        return [n for n in self._neighbours[c] if n not in self.asked]

    def ask(self) -> Config | None:
        """Propose a neighbour of the best measured config, or a random one while sampling."""
        first = self._first()
        if first is not None:
            return first
        if self._sampled < self.sample:
            self._sampled += 1
            return self._random_unasked()
        ranked = sorted((ms, c.key(), c) for c, ms in self.told.items() if ms is not None)
        for _ms, _k, c in ranked:
            left = self._untried_neighbours(c)
            if left:
                return self._take(self.rng.choice(left))
        if any(ms is None for ms in self.told.values()) or not ranked:
            pass  # nothing measured yet (or only failures): explore at random
        return self._random_unasked()


class OptunaTPE(_Base):
    """Optuna's TPE sampler over the parameters as categorical choices.

    A proposal that breaks a constraint or repeats a measured config is told back to the model
    at once (a failure ranks last; a repeat gets its known time), so TPE learns the constraint
    region without running anything. After 10 fruitless proposals a random unasked config is used.
    """

    def __init__(self, space: Space, limits: Mapping[str, Any] | None = None, seed: int = 0,
                 startup: int | None = None):
        super().__init__(space, limits, seed)
        optuna = _import_optuna()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        n = self.n_valid
        startup = startup if startup is not None else max(4, min(10, math.ceil(0.03 * n)))
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup,
                                             multivariate=True)
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        # choices by index: optuna stores only None/bool/int/float/str, and a list value
        # (nvcc_flags) is a tuple; an unordered choice is the same choice under any name
        self._dists = {p.name: optuna.distributions.CategoricalDistribution(
            list(range(len(p.values)))) for p in space.params}
        self._trials: dict[Config, Any] = {}

    def _penalty(self) -> float:
        done = [ms for ms in self.told.values() if ms is not None]
        return 10.0 * max(done) if done else 1e9

    def ask(self) -> Config | None:
        """Ask TPE until it proposes an untried valid config (constraint breaks told back)."""
        if self.exhausted:
            return None
        first = self._first()
        if first is not None:
            return first
        for _ in range(10):
            trial = self._study.ask(self._dists)
            c = Config({p.name: p.values[trial.params[p.name]] for p in self.space.params})
            if not self.is_valid(c):
                self._study.tell(trial, self._penalty())
            elif c in self.asked:
                ms = self.told.get(c)
                self._study.tell(trial, self._penalty() if ms is None else ms)
            else:
                self._trials[c] = trial
                return self._take(c)
        return self._random_unasked()

    def tell(self, config: Config, ms: float | None) -> None:
        """Tell the model (a failure ranks last)."""
        super().tell(config, ms)
        trial = self._trials.pop(config, None)
        value = self._penalty() if ms is None else ms
        if trial is not None:
            self._study.tell(trial, value)
        else:  # a stored result from an earlier sweep: add it as a finished trial
            import optuna

            self._study.add_trial(optuna.trial.create_trial(
                params={p.name: p.values.index(config[p.name]) for p in self.space.params},
                distributions=self._dists, value=value))


def _import_optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ImportError("[ktune] the 'tpe' strategy needs optuna: "
                          "pip install 'jupyter_ktune[sweep]' (or pip install optuna)") from None
    return optuna


StrategyFactory = Callable[..., Strategy]

#: name -> strategy class; ``tune(strategy=...)`` and ``ktune tune --strategy`` take these names
STRATEGIES: dict[str, StrategyFactory] = {
    "exhaustive": Exhaustive,
    "random": RandomSearch,
    "greedy": GreedyLocal,
    "tpe": OptunaTPE,
}


def make_strategy(name: str, space: Space, limits: Mapping[str, Any] | None = None,
                  seed: int = 0) -> Strategy:
    """Build the strategy called ``name``; an unknown name lists the known ones."""
    if not isinstance(name, str):
        raise TypeError(f"[ktune] strategy must be a name, got {type(name).__name__}")
    factory = STRATEGIES.get(name)
    if factory is None:
        raise ValueError(f"[ktune] unknown strategy '{name}'. "
                         f"Choose one of: {', '.join(sorted(STRATEGIES))}.")
    return factory(space, limits, seed=seed)


def replay(name: str, space: Space, recorded: Mapping[Config, float | None],
           limits: Mapping[str, Any] | None = None, seed: int = 0,
           budget: int | None = None) -> list[tuple[Config, float | None]]:
    """Run a strategy against recorded times instead of a device, one config at a time.

    ``recorded`` maps each config to its stored median (None = failed); a config missing from
    it counts as failed. Returns the evaluations in order, up to ``budget`` (default: all).
    """
    s = make_strategy(name, space, limits, seed)
    out: list[tuple[Config, float | None]] = []
    limit = budget if budget is not None else s.n_valid  # type: ignore[attr-defined]
    while len(out) < limit:
        c = s.ask()
        if c is None:
            break
        ms = recorded.get(c)
        s.tell(c, ms)
        out.append((c, ms))
    return out


def evaluations_to_within(trace: Sequence[tuple[Config, float | None]], best_ms: float,
                          tolerance: float = 0.03) -> int | None:
    """Count the evaluations until one is within ``tolerance`` of ``best_ms`` (None: never)."""
    for i, (_c, ms) in enumerate(trace, 1):
        if ms is not None and ms <= best_ms * (1 + tolerance):
            return i
    return None


def top_k(told: Mapping[Config, float | None], k: int) -> list[tuple[Config, float]]:
    """Return the ``k`` fastest configs with their times."""
    ok = [(ms, c.key(), c) for c, ms in told.items() if ms is not None]
    return [(c, ms) for ms, _k, c in heapq.nsmallest(k, ok)]
