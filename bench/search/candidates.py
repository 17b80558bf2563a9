"""The candidates for hpo's default (`scheduler: {type: asha}` without min_resource): promotion ASHA with the
multi-fidelity TPE, differing in where the rungs go, how many there are, and when a rung may judge. Held-out
selection (bench/search/heldout.py) picks one of them on problems it is not judged on.

Each is laid out from the problem's study file as hpo would lay it out (`hpo.spec.scheduler`): the first rung at the
study's first evaluation (`eval_every`) or at the first evaluation past a fraction of the length, further rungs at
eta times the one below (`hpo.spec.scheduler.rung_levels`), rounded up to a recorded evaluation.
"""

from __future__ import annotations

import math

from bench.search.methods import Method
from bench.search.problems import PROBLEMS, Problem
from hpo.scheduling.rank_gate import RankGate
from hpo.spec.scheduler import rung_levels

# `scheduler: {type: asha}` with `sampler: {type: tpe, multi_fidelity: false}`, built by hpo (round 8)
SHIPPED_OPTUNA_TPE = "hpo: asha as written, Optuna's TPE"


def at_evaluation(problem: Problem, step: int) -> int:
    """The first recorded evaluation at or after `step` (a rung can only act where the study evaluates)."""
    return min(problem.steps - problem.eval_every, math.ceil(step / problem.eval_every) * problem.eval_every)


def levels_from(problem: Problem, first: int, rungs: int | None) -> tuple[int, ...]:
    """Rungs from `first`, each eta times the one below, below the length, at recorded evaluations."""
    raw = rung_levels(first, problem.steps, problem.eta, rungs)
    return tuple(sorted({at_evaluation(problem, level) for level in raw}))


def hyperband_brackets(problem: Problem, first: int) -> tuple[tuple[int, ...], ...]:
    """Hyperband's brackets over ASHA: bracket s has its rungs from first * eta^s, for every s with a level below the
    length (the last bracket is the most patient)."""
    starts = rung_levels(first, problem.steps, problem.eta)
    return tuple(levels_from(problem, start, None) for start in starts)


def asha(
    name: str,
    levels: tuple[int, ...],
    gate: RankGate | None,
    brackets: tuple[tuple[int, ...], ...] = (),
) -> Method:
    return Method(
        name,
        "study",
        asha=True,
        underfilled=True,
        multi_fidelity=True,
        levels=levels,
        gate=gate,
        brackets=brackets,
    )


def candidates_for(problem: Problem) -> list[Method]:
    """hpo's ASHA variants on `problem`: the default before issue 36 first."""
    first = problem.eval_every
    ninth = at_evaluation(problem, math.ceil(problem.steps / problem.eta**2))
    third = at_evaluation(problem, math.ceil(problem.steps / problem.eta))
    two = RankGate(2, -1.0)  # judge once two trials have run to the end
    one = RankGate(1, -1.0)
    return [
        asha("hpo: 1 rung at 1st eval (2 finished)", (first,), two),
        asha("hpo: 1 rung at 1st eval (ungated)", (first,), None),
        asha("hpo: 1 rung at 1st eval (1 finished)", (first,), one),
        asha("hpo: 2 rungs from 1st eval (2 finished)", levels_from(problem, first, 2), two),
        asha("hpo: all rungs from 1st eval (2 finished)", levels_from(problem, first, None), two),
        asha("hpo: all rungs from 1st eval (1 finished)", levels_from(problem, first, None), one),
        asha("hpo: all rungs from 1st eval (ungated)", levels_from(problem, first, None), None),
        asha("hpo: 1 rung at 1/9 (2 finished)", (ninth,), two),
        asha("hpo: rungs from 1/9 (2 finished)", levels_from(problem, ninth, None), two),
        asha("hpo: 1 rung at 1st eval (rank gate 5 pairs 0.5)", (first,), RankGate(5, 0.5)),
        asha("hpo: 1 rung at 1/9 (ungated)", (ninth,), None),
        asha("hpo: rungs from 1/9 (ungated)", levels_from(problem, ninth, None), None),
        asha(
            "hpo: all rungs from 1st eval (rank gate 5 pairs 0.5)",
            levels_from(problem, first, None),
            RankGate(5, 0.5),
        ),
        asha(
            "hpo: rungs from 1/9 (rank gate 5 pairs 0.5)", levels_from(problem, ninth, None), RankGate(5, 0.5)
        ),
        asha(
            "hpo: Hyperband brackets from 1/9 (2 finished)",
            (ninth,),
            two,
            hyperband_brackets(problem, ninth),
        ),
        asha(
            "hpo: Hyperband brackets from 1st eval (2 finished)",
            (first,),
            two,
            hyperband_brackets(problem, first),
        ),
        asha(
            "hpo: Hyperband brackets from 1st eval (ungated)",
            (first,),
            None,
            hyperband_brackets(problem, first),
        ),
        asha(
            "hpo: 2 brackets: 1 rung at 1st eval | all rungs (2 finished)",
            (first,),
            two,
            ((first,), levels_from(problem, first, None)),
        ),
        # Stop-type successive halving (Optuna's pruner, as the peers that lead on the well-ranking problems run it:
        # Syne Tune's and Ray Tune's ASHA, Optuna's TPE + SH), with hpo's multi-fidelity TPE.
        stop(problem, "hpo: stop-type rungs from 1st eval", {"min_resource": first}),
        stop(problem, "hpo: stop-type rungs from 1/9", {"min_resource": ninth}),
        stop(
            problem,
            "hpo: stop-type rungs from 1st eval (4 at a rung)",
            {"min_resource": first, "bootstrap_count": 4},
        ),
        stop(
            problem,
            "hpo: stop-type Hyperband from 1st eval",
            {"type": "hyperband", "min_resource": first, "max_resource": problem.steps},
        ),
        # Round 2 of the stop-type ones, around the best of the first four (rungs from a ninth): a gentler and a
        # harsher cut, Hyperband's hedge over where the first rung goes, and a rung that waits for a second trial.
        stop(
            problem, "hpo: stop-type rungs from 1/9 (eta 2)", {"min_resource": ninth, "reduction_factor": 2}
        ),
        stop(
            problem, "hpo: stop-type rungs from 1/9 (eta 4)", {"min_resource": ninth, "reduction_factor": 4}
        ),
        stop(
            problem,
            "hpo: stop-type Hyperband from 1/9",
            {"type": "hyperband", "min_resource": ninth, "max_resource": problem.steps},
        ),
        stop(
            problem,
            "hpo: stop-type rungs from 1/9 (2 at a rung)",
            {"min_resource": ninth, "bootstrap_count": 2},
        ),
        stop(problem, "hpo: stop-type rungs from 1/3", {"min_resource": third}),
        # Round 3, around the best of round 2 at 100 seeds (eta 2 from a ninth): the same cut from the first
        # evaluation, Hyperband's hedge at eta 2, and random search under it (as Ray Tune's ASHA, the best peer).
        stop(
            problem,
            "hpo: stop-type rungs from 1st eval (eta 2)",
            {"min_resource": first, "reduction_factor": 2},
        ),
        stop(
            problem,
            "hpo: stop-type Hyperband from 1/9 (eta 2)",
            {
                "type": "hyperband",
                "min_resource": ninth,
                "max_resource": problem.steps,
                "reduction_factor": 2,
            },
        ),
        stop(
            problem,
            "hpo: stop-type rungs from 1/9 (eta 2) random search",
            {"min_resource": ninth, "reduction_factor": 2},
            sampler="random",
        ),
    ]


def explored_for(problem: Problem) -> list[Method]:
    """Rounds 4-6, run after the reference table (docs/search-rounds.md): schedules that adapt to what the study sees,
    each the round-3 pick until it sees enough (rounds 4-5), and gentler rungs from the first evaluation (round 6).
    They are judged against what ships, and are not in the held-out rule's pool (`report.py --with-explored` puts
    them there): most are the shipped schedule on most seeds, and a rule that takes the smallest of many near-equal
    noisy figures picks by luck (docs/search-rounds.md, "Rounds 4-5"); all were designed after the 13 were seen.
    Round 7 put round 6's three beside the schedule then shipped in a pool of their own at 400 seeds (`report.py
    --pool`), and "gentle rungs from 1st eval (keep 3/4 x2)" is what `scheduler: {type: asha}` ran until round 9. Round 8
    (ranked_keep.py, and the shipped rungs under Optuna's TPE) left it in place (docs/search-rounds.md, "Round 8").
    Round 9 put the keep 2/3 rungs under Optuna's TPE beside them: the rule then picks ranked keep 1/3 under
    Optuna's TPE, and `scheduler: {type: asha}` runs it since (docs/search-rounds.md, "Round 9")."""
    ninth = at_evaluation(problem, math.ceil(problem.steps / problem.eta**2))
    return [
        # Round 4 (issue 36's "adapt the rung from what the study sees"): the round-3 pick's cut (eta 2), its first rung
        # at a ninth until a few trials have completed, then at the earliest fraction whose values rank theirs.
        adaptive("hpo: adaptive first rung (4 pairs at 0.7)", {}),
        adaptive("hpo: adaptive first rung (6 pairs at 0.7)", {"min_pairs": 6}),
        adaptive("hpo: adaptive first rung (4 pairs at 0.5)", {"min_correlation": 0.5}),
        adaptive("hpo: adaptive first rung (4 pairs at 0.7; eta 3)", {"reduction_factor": 3}),
        # BOHB's hedge against a misled model: a third of the trials at random, under the round-3 pick's rungs and
        # under the adaptive ones.
        Method(
            "hpo: stop-type rungs from 1/9 (eta 2) a third random",
            "study",
            {"type": "successive_halving", "min_resource": ninth, "reduction_factor": 2},
            multi_fidelity=True,
            random_share=1 / 3,
        ),
        Method(
            "hpo: adaptive first rung (4 pairs at 0.7) a third random",
            "study",
            adaptive={"reduction_factor": 2},
            multi_fidelity=True,
            random_share=1 / 3,
        ),
        # Round 5: Ray Tune's recipe (random search, a rung at the first evaluation, eta 3) once the first evaluation
        # is seen to rank the values at a ninth, else the round-3 pick (early_ranks.py); and the same keeping the model.
        early("hpo: Ray's recipe when early ranks hold (10 at 0.8)", {}),
        early("hpo: Ray's recipe when early ranks hold (10 at 0.75)", {"min_correlation": 0.75}),
        early("hpo: Ray's recipe when early ranks hold (16 at 0.8)", {"pairs": 16}),
        early("hpo: Ray's rungs when early ranks hold (10 at 0.8) model kept", {"random": False}),
        # Round 6: rungs from the first evaluation that stop less than half (keep_rungs.py): where early values
        # mislead, the best configurations sit low at a ninth more often than at the first evaluation, and seldom in
        # the bottom third of either.
        keep("hpo: gentle rungs from 1st eval (keep 2/3 x2)", 2 / 3, 2),
        keep("hpo: gentle rungs from 1st eval (keep 3/4 x2)", 3 / 4, 2),
        keep("hpo: gentle rungs from 1st eval (keep 2/3 x3)", 2 / 3, 3),
        # Round 8: the share kept at each rung set by how well the rung's values rank the values four times further
        # on among the trials so far (ranked_keep.py): a harder cut where they rank, none where they do not.
        ranked("hpo: ranked keep 1/2 | 3/4 | all", {}),
        ranked("hpo: ranked keep 1/3 | 3/4 | all", {"high_keep": 1 / 3}),
        ranked("hpo: ranked keep 1/2 | 3/4 | 7/8 (0.7/0.4)", {"low_keep": 7 / 8, "high": 0.7, "low": 0.4}),
        # and the default's rungs, and the ranked ones, under Optuna's TPE as it is (learning from finished and
        # stopped trials only), not the multi-fidelity TPE that learns from rung values.
        plain("hpo: gentle rungs from 1st eval (keep 3/4 x2) plain TPE", 3 / 4, 2),
        Method("hpo: ranked keep 1/3 | 3/4 | all plain TPE", "study", ranked_keep={"high_keep": 1 / 3}),
        # the same as `hpo run` builds it from `scheduler: {type: asha}` and `sampler: {multi_fidelity: false}`
        # (for real.py; its simulated runs equal the plain TPE candidate's seed for seed)
        Method(SHIPPED_OPTUNA_TPE, "study", scheduler={"type": "asha"}, multi_fidelity=False),
        # Round 9: round 7's other two gentle rungs under Optuna's TPE (round 8 saw Optuna's TPE gain most where
        # the multi-fidelity TPE is led by early values, and keep 2/3 cut harder where curves rank early).
        plain("hpo: gentle rungs from 1st eval (keep 2/3 x2) plain TPE", 2 / 3, 2),
        plain("hpo: gentle rungs from 1st eval (keep 2/3 x3) plain TPE", 2 / 3, 3),
        # Round 11: what ships, deciding sooner where the rung ranks. Rounds 9-10 saw its pairs (a rung's value and the
        # value 4x further on, 8 of them) come after the hard cuts had won on charlm and fresh3-charsource; pairs at 2x
        # exist about twice as early, and 5 pairs sooner than 8.
        ranked_plain("hpo: ranked keep 1/3 (pairs at 2x) plain TPE", {"ahead": 2}),
        ranked_plain("hpo: ranked keep 1/3 (5 pairs) plain TPE", {"min_pairs": 5}),
        ranked_plain("hpo: ranked keep 1/3 (5 pairs at 2x) plain TPE", {"ahead": 2, "min_pairs": 5}),
        # Round 12 (explored at 100 seeds on 8 problems, nothing stated from it: docs/search-rounds.md, "Round 12"). An
        # upper rung still without its pairs takes the hard cut of the nearest rung below that has them: its pairs
        # (4x further on) come late, so on curves that rank from the first evaluation (fresh3-charsource, charlm) what
        # ships keeps 3/4 there long after the first rung has seen them rank.
        ranked_plain("hpo: ranked keep 1/3 (a lower rung's cut) plain TPE", {"inherit": True}),
        # The share kept before the pairs come (and where they rank moderately): 1/2 or 2/3 instead of 3/4.
        ranked_plain("hpo: ranked keep 1/3 (1/2 until it ranks) plain TPE", {"keep": 1 / 2}),
        ranked_plain("hpo: ranked keep 1/3 (2/3 until it ranks) plain TPE", {"keep": 2 / 3}),
        # Where the cut is the most it can be (a third kept at every rung, whatever the pairs say), under Optuna's TPE
        # and under random search: which part of the hard cuts' lead on fresh3-charsource is the cut, which the sampler.
        Method("hpo: keep 1/3 at every rung plain TPE", "study", ranked_keep=THIRD_ALWAYS),
        Method("hpo: keep 1/3 at every rung random search", "random", ranked_keep=THIRD_ALWAYS),
        Method("hpo: keep 1/4 at every rung plain TPE", "study", ranked_keep=QUARTER_ALWAYS),
        Method("hpo: ranked keep 1/3 random search", "random", ranked_keep={"high_keep": 1 / 3}),
        # Round 13 (explored at 100 seeds): what ships, cutting hard on fewer than 8 pairs only when they leave no
        # doubt (`sure`: the correlation's lower bound at or over 0.8; 4-6 pairs ranking perfectly). Round 11's 5
        # pairs decided sooner on any 5; this decides sooner only where the rung ranks beyond doubt, and as what
        # ships otherwise. With pairs at 2x too, the evidence comes sooner still.
        ranked_plain("hpo: ranked keep 1/3 (sooner when sure) plain TPE", {"sure": 1.28}),
        ranked_plain(
            "hpo: ranked keep 1/3 (sooner when sure; pairs at 2x) plain TPE", {"sure": 1.28, "ahead": 2}
        ),
        # Round 14: what ships, keeping less before the pairs come where screening a configuration is cheap: a
        # trial's start and set-up cost less than one evaluation interval (ranked_keep.py's `cheap_keep`). Round 12's
        # "1/2 until it ranks" won where curves rank from the first evaluation and lost where they mislead; the text
        # problems where it won are those whose trials start for less than an evaluation (0.2-0.4 of one; the
        # others 1.1-9.4), as Hyperband's advice to start the rungs where the overhead is small says cutting pays.
        ranked_plain(
            "hpo: ranked keep 1/3 (sooner when sure; 1/2 until it ranks where screening is cheap) plain TPE",
            SHIPPED_RANKED | {"cheap_keep": 1 / 2},
        ),
        ranked_plain(
            "hpo: ranked keep 1/3 (sooner when sure; 1/2 until it ranks where screening is cheaper) plain TPE",
            SHIPPED_RANKED | {"cheap_keep": 1 / 2, "cheap_below": 1.5},
        ),
        # Round 15: what ships, without round 13's early hard cut where a trial's start costs many evaluation
        # intervals (ranked_keep.py's `dear_above`). Round 13's cut gained where trials start for 1.3-4.5 intervals
        # and cost on fresh3-friedman2 (7.9: curves that cross) and synth-optim (5.4); fresh-diabetes (10.4) and
        # fresh3-friedman2, the misses left, are where random search or TPE without stopping lead.
        *(
            ranked_plain(
                f"hpo: ranked keep 1/3 (what ships; not sure where the start is {above}+ intervals) plain TPE",
                CHEAPER | {"dear_above": above},
            )
            for above in (4, 6)
        ),
        *(
            ranked_plain(
                f"hpo: ranked keep 1/3 (what ships; {label} until it ranks where the start is 6+ intervals) plain TPE",
                CHEAPER | {"dear_above": 6, "dear_keep": keep},
            )
            for label, keep in (("7/8", 7 / 8), ("all", 1.0))
        ),
        # Round 16 (explored at the costs trial_costs.py measured in real runs: a trial starts for 0.04 s, each report
        # costs 0.02 s, so every recorded problem's trials start for 1.1-1.3 intervals and round 14's half kept acts
        # on all of them, round 15's seven eighths on none): the share kept before the pairs come, whatever the start.
        ranked_plain(
            "hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks) plain TPE",
            {"sure": 1.28, "keep": 2 / 3},
        ),
        ranked_plain(
            "hpo: ranked keep 1/3 (sooner when sure; 1/2 until it ranks) plain TPE",
            {"sure": 1.28, "keep": 1 / 2},
        ),
        # Round 18: what ships, with every n-th trial never stopped (ranked_keep.py's `hedge_every`): a hedge, as
        # Hyperband's bracket without rungs, for curves that cross after the rungs (fresh9-checker, fresh3-friedman2:
        # random search or TPE without stopping lead there, 3.14x and 1.71x at the measured costs).
        *(
            ranked_plain(
                f"hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks; every {every}th never stopped) plain TPE",
                {"sure": 1.28, "keep": 2 / 3, "hedge_every": every},
            )
            for every in (4, 8)
        ),
        # and the same never-stopped eighth judged wherever the rung's pairs rank (a third kept): the hedge's cost fell
        # where the rungs rank early (fresh6-chartorch, fresh9-sinereg, fresh7-charconst), its gain where they do not.
        ranked_plain(
            "hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks; every 8th never stopped until it ranks) plain TPE",
            {"sure": 1.28, "keep": 2 / 3, "hedge_every": 8, "hedge_until_ranks": True},
        ),
        # Round 19: a hedge from what the study sees. Where the pair with the best value four times further on sits
        # outside the best third (or two thirds) at the rung, a cut there would have stopped the best trial seen so
        # far: the rung keeps all (or a share one step gentler). On the checkerboard most cuts, and the cut winners,
        # fall at 1-7 pairs, before any correlation; on fresh3-friedman2, where the pairs rank at 0.8 or more.
        *(
            ranked_plain(
                f"hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks; all where the best later was outside the {label}) plain TPE",
                {"sure": 1.28, "keep": 2 / 3, "lost_best": within},
            )
            for label, within in (("top third", 1 / 3), ("top two thirds", 2 / 3))
        ),
        ranked_plain(
            "hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks; 2/3 where the best later was outside the top third) plain TPE",
            {"sure": 1.28, "keep": 2 / 3, "lost_best": 1 / 3, "lost_best_keep": 2 / 3},
        ),
        # and, stated after those three ran on eight problems at 40 seeds (none mended the checkerboard, all cost
        # elsewhere): a rung whose values are mostly evaluation noise keeps all (ranked_keep.rung_reliability: the
        # checkerboard's rungs 0.33-0.49 over every recorded configuration, every other problem's 0.86 or more).
        *(
            ranked_plain(
                f"hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks; all where the rung is under {reliable} reliable) plain TPE",
                {"sure": 1.28, "keep": 2 / 3, "reliable": reliable},
            )
            for reliable in (0.7, 0.8)
        ),
    ]


SHIPPED_RANKED = {"sure": 1.28}
CHEAPER = SHIPPED_RANKED | {"cheap_keep": 1 / 2, "cheap_below": 1.5}  # what ships since round 14


THIRD_ALWAYS = {"keep": 1 / 3, "high_keep": 1 / 3, "low_keep": 1 / 3}
QUARTER_ALWAYS = {"keep": 1 / 4, "high_keep": 1 / 4, "low_keep": 1 / 4}


def ranked_plain(name: str, options: dict[str, object]) -> Method:
    """What ships (ranked keep 1/3 | 3/4 | all under Optuna's TPE) with some of its ranked rule's settings changed."""
    return Method(name, "study", ranked_keep={"high_keep": 1 / 3, **options})


def ranked(name: str, options: dict[str, object]) -> Method:
    return Method(name, "study", ranked_keep=options, multi_fidelity=True)


def plain(name: str, share: float, spacing: int) -> Method:
    return Method(name, "study", keep_rungs={"keep": share, "spacing": spacing}, multi_fidelity=False)


def keep(name: str, share: float, spacing: int) -> Method:
    return Method(name, "study", keep_rungs={"keep": share, "spacing": spacing}, multi_fidelity=True)


def early(name: str, rule: dict[str, object]) -> Method:
    return Method(
        name, "study", early_ranks={"pairs": 10, "min_correlation": 0.8, **rule}, multi_fidelity=True
    )


def adaptive(name: str, options: dict[str, object]) -> Method:
    """bench.search.adaptive_rungs at eta 2 (the shipped cut) unless `options` say, with the multi-fidelity TPE."""
    return Method(name, "study", adaptive={"reduction_factor": 2, **options}, multi_fidelity=True)


def stop(problem: Problem, name: str, pruner: dict[str, object], sampler: str = "study") -> Method:
    """A stop-type schedule: an Optuna pruner section of a study file (successive halving unless it says), at the
    problem's eta, with the multi-fidelity TPE learning from every rung value (or random search)."""
    section = {"type": "successive_halving", "reduction_factor": problem.eta, **pruner}
    return Method(name, sampler, section, multi_fidelity=sampler == "study")


CURRENT = "hpo: 1 rung at 1st eval (2 finished)"  # the default before issue 36
PROMOTION_RUNG = (
    "hpo: 1 rung at 1/9 (2 finished)"  # shipped until the switch: `mode: promotion`'s default rung
)

# Their names (the same on every problem): what report.py leaves out of the rule's pool unless asked.
EXPLORED = frozenset(m.name for m in explored_for(PROBLEMS["digits"]))
