"""The population at an interval: a step is decided once every live member has a score there; then the bottom quantile
copies the top with explored values, the rest continue unchanged."""

from __future__ import annotations

from hpo.scheduling.pbt_population import Member, decide, step_complete, steps_to_decide
from hpo.spec.pbt import PbtSchedulerSpec
from hpo.spec.search_space import ParamSpec

SPACE = {
    "learning_rate": ParamSpec(type="float", low=1e-4, high=1.0, log=True),
    "hidden": ParamSpec(type="int", low=8, high=64),
}
PBT = PbtSchedulerSpec(
    type="pbt",
    population=4,
    perturbation_interval=10,
    max_resource=30,
    quantile_fraction=0.25,
    resample_probability=0.0,
    mutations={"learning_rate": {"factors": [0.5, 2.0]}},
)


def member(number: int, scores: dict[int, float], lr: float, paused_at: int | None = 10, **kw) -> Member:
    return Member(number, scores, [(0, {"learning_rate": lr, "hidden": 8 * (number + 1)})], paused_at, **kw)


def test_a_step_waits_for_every_live_member_of_the_population():
    members = [member(0, {10: 0.9}, 0.1), member(1, {10: 0.5}, 0.01), member(2, {}, 0.001, paused_at=None)]
    assert not step_complete(members, population=4, step=10)  # member 3 has not started
    members.append(member(3, {10: 0.7}, 0.05))
    assert (
        not step_complete(members, 4, 10) and steps_to_decide(members, 4) == []
    )  # member 2 still trains to 10
    members[2].dead = True  # failed for good: the others do not wait for it
    assert steps_to_decide(members, 4) == [10]


def test_the_bottom_member_copies_the_top_one_with_its_hyperparameters_explored():
    members = [
        member(0, {10: 0.9}, 0.1),
        member(1, {10: 0.5}, 0.01),
        member(2, {10: 0.8}, 0.001),
        member(3, {10: 0.7}, 0.05),
    ]
    decisions = {d.member: d for d in decide(members, 10, PBT, SPACE, maximize=True, seed=0)}
    assert sorted(decisions) == [0, 1, 2, 3]
    copy = decisions[1]
    assert copy.source == 0 and copy.params["hidden"] == 8  # the source's hidden size comes with its weights
    assert copy.params["learning_rate"] in (0.05, 0.2) and copy.changes == {
        "learning_rate": copy.params["learning_rate"]
    }
    for number in (0, 2, 3):
        assert decisions[number].source is None and decisions[number].changes == {}
        assert decisions[number].params == members[number].params_by_step[0][1]
    again = {d.member: d for d in decide(members, 10, PBT, SPACE, maximize=True, seed=0)}
    assert again == decisions  # seeded: a worker that re-takes the decision after a crash takes the same one


def test_decided_members_and_members_elsewhere_are_left_alone():
    members = [
        member(0, {10: 0.9, 20: 0.95}, 0.1, paused_at=20),
        member(1, {10: 0.5}, 0.01, decided={10}),
        member(2, {10: 0.8}, 0.001),
        member(3, {10: 0.7}, 0.05),
    ]
    assert [d.member for d in decide(members, 10, PBT, SPACE, maximize=True, seed=0)] == [2, 3]


def test_a_copy_takes_the_values_the_source_had_at_that_step():
    source = Member(
        0,
        {20: 0.9},
        [(0, {"learning_rate": 0.1, "hidden": 8}), (10, {"learning_rate": 0.2, "hidden": 8})],
        20,
    )
    others = [member(n, {20: s}, 0.01, paused_at=20) for n, s in ((1, 0.1), (2, 0.5), (3, 0.6))]
    copy = next(d for d in decide([source, *others], 20, PBT, SPACE, True, 0) if d.member == 1)
    assert copy.source == 0 and copy.params["learning_rate"] in (0.1, 0.4)  # 0.2 (from step 10) x 0.5 or x 2
