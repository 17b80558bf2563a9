"""The text family: LoRA adapters on the pretrained MiniLM (studies/minilm_lora.yaml) and a tiny character-level GPT
on Python's own help topics (charlm.yaml beside this file), on its standard library's source (fresh3-charsource.yaml) or on
numpy's docstrings (fresh4-chardocs.yaml), the Unicode character names (fresh5-charnames.yaml), torch's
docstrings (fresh6-chartorch.yaml) or scikit-learn's at a constant learning rate (fresh7-charconst.yaml)."""

from __future__ import annotations

from bench.search.problems import DATA, ROOT, Problem

PROBLEMS = [
    Problem(
        name="minilm-lora",
        study=ROOT / "studies" / "minilm_lora.yaml",
        configurations=100,
        draw_seed=2025,
        steps=48,
        eval_every=6,
        n_trials=30,
        workers=2,
        asha_levels=(6, 18),
        pruner_min_steps=6,
        pause_s=0.072,
        resume_s=0.305,
        start_s=0.255,
        training={"eval_steps": 6, "logging_steps": 6},
    ),
    # A tiny character-level GPT (studies/tasks/charlm.py): 400 steps, an evaluation every 40; eval loss minimised.
    Problem.from_study("charlm", configurations=60, draw_seed=2031),
    # The third fresh set (2026-12-02, after round 9's default shipped): the same model on Python source code.
    Problem.from_study(
        "fresh3-charsource", configurations=150, draw_seed=2057, fresh=True, data_dir=DATA / "dense"
    ),
    # The fourth fresh set (2026-12-03, after round 11's candidates were stated): the same model on numpy's docstrings.
    Problem.from_study(
        "fresh4-chardocs", configurations=100, draw_seed=2060, fresh=True, data_dir=DATA / "dense"
    ),
    # The fifth fresh set (2026-12-03, after round 12 was stated): the same model on the Unicode character names;
    # recorded at 60 configurations, then again from scratch at 150 (the first 60 curves equal bit for bit), since
    # the hard cuts started all 60 on most runs.
    Problem.from_study(
        "fresh5-charnames", configurations=150, draw_seed=2063, fresh=True, data_dir=DATA / "dense"
    ),
    # The sixth fresh set (2026-12-03, after round 13's candidate passed its selection): torch's docstrings, 20
    # evaluations a trial.
    Problem.from_study(
        "fresh6-chartorch", configurations=150, draw_seed=2064, fresh=True, data_dir=DATA / "dense"
    ),
    # The seventh fresh set (2026-12-03, after round 14 was stated): scikit-learn's docstrings at a constant learning
    # rate.
    Problem.from_study(
        "fresh7-charconst", configurations=100, draw_seed=2069, fresh=True, data_dir=DATA / "dense"
    ),
]
