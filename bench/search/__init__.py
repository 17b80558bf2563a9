"""A search benchmark that tells methods apart: recorded learning curves replayed against a simulated clock.

    python bench/search/record.py --problem digits      # train the recorded configurations once (minutes)
    python bench/search/run.py --problem digits --seeds 30   # every method on 30 seeds, from the recording
    python bench/search/run.py --quick                        # every method on every problem, 3 seeds
    python bench/search/suite.py --seeds 100 && python bench/search/report.py   # the suite's held-out table

problems/     what a problem is (study file, budget, rungs, workers); one module per family, a study file per problem
describe.py   each recorded problem's size, budget, targets and how early its curves rank
record.py     trains a problem's configurations with the study's task and our Trainer; writes data/<problem>.json.gz
recording.py  loads a recording and maps a sampled configuration to the nearest recorded one not yet run
simulate.py   one method, one seed: Optuna samplers/pruners and hpo's ASHA rule (and rank gate) event by event
methods.py    the methods compared (sampler + pruner, or sampler + promotion ASHA)
figures.py    time to target, best at fractions of the budget, compute; medians and IQR over seeds
run.py        one problem's table, every method
candidates.py hpo's candidate defaults (rung placement, rung count, gate, Hyperband-style brackets)
adaptive_rungs.py, early_ranks.py, random_share.py, model_or_random.py, keep_rungs.py, ranked_keep.py   rounds 4-8's
              candidates (outside the rule's pool unless `report.py --pool` names them)
suite.py      every method on every recorded problem, many seeds, in parallel (runs/suite/<problem>.json)
heldout.py    held-out selection of hpo's default (leave one problem out) and the ranks
report.py     the suite's tables
standing.py   issue 36's bar put to every method (what ships and each peer against the best of the others)
small.py      studies bounded by their trial count (8, 15, 30 trials), not by time: what stopping costs the final model
sensitivity.py the rule's pick and the shipped rung beside the peers at the problems' costs and with every overhead scaled
crosscheck.py a real `hpo run` (one worker, enqueued recorded configurations) against the simulator
real.py       methods run for real (`hpo run`, 2 workers, a time limit), a few seeds, beside their simulation
pace.py       a real run's own pace (its trials' seconds over the recorded cost of their work): real.py's clock
peers.py      the peers that run in their own environments, called per problem
peer_synetune.py, peer_ray.py   Syne Tune's and Ray Tune's schedulers on the same recordings, in their own environments
peer_smac.py, peer_dehb.py      SMAC3 with Hyperband and DEHB, on peer_fidelity.py's clock (peer_configspace.py: the space)
"""
