"""The events a `TrainerCallback` can handle, and where each one fires in the loop."""

from __future__ import annotations

from enum import Enum


class Event(str, Enum):
    """Every point of the training loop where callbacks run, in the style of composer's Event.

    The loop of `Trainer.train`, with the place of each event (``#`` marks what the loop does between them)::

        # build the model (or call model_init), the strategy, the data loaders
        ON_INIT_END                                   # end of Trainer.__init__
        # strategy.setup: place/wrap the model, build optimizer and scheduler
        ON_TRAIN_BEGIN                                # a fresh TrainerState; callbacks reset their own state here
        # resuming: restore weights, optimizer, scheduler, RNGs, state, stateful callbacks; skip the seen batches
        # eval_on_start: evaluate() -> ON_EVALUATE
        for epoch in range(start_epoch, num_train_epochs):
            ON_EPOCH_BEGIN
            for window in accumulation windows of the epoch's batches:   # the last window may be shorter
                ON_STEP_BEGIN
                for micro_batch in window:
                    loss = compute_loss(model, micro_batch) * weight     # weight = samples / samples in window
                    strategy.backward(loss)
                    ON_SUBSTEP_END                    # after every micro-batch but the last one
                ON_PRE_OPTIMIZER_STEP                 # gradients complete, not yet clipped
                grad_norm = strategy.clip_grad_norm(max_grad_norm)
                strategy.optimizer_step()
                ON_OPTIMIZER_STEP
                scheduler.step(); optimizer.zero_grad()
                global_step += 1
                ON_STEP_END                           # DefaultFlowCallback sets should_log/evaluate/save here
                if control.should_log: ON_LOG
                if control.should_evaluate: evaluate() -> ON_PREDICTION_STEP per batch, ON_EVALUATE
                if control.should_save: save checkpoint -> ON_SAVE
                if control.should_epoch_stop or control.should_training_stop: break
            ON_EPOCH_END                              # then log/evaluate/save as for a step
            if control.should_training_stop: break
        # load_best_model_at_end: load the best checkpoint's weights
        ON_TRAIN_END                                  # always runs, also after a callback stopped training

        predict(dataset): ON_PREDICTION_STEP per batch, then ON_PREDICT
    """

    ON_INIT_END = "on_init_end"
    ON_TRAIN_BEGIN = "on_train_begin"
    ON_TRAIN_END = "on_train_end"
    ON_EPOCH_BEGIN = "on_epoch_begin"
    ON_EPOCH_END = "on_epoch_end"
    ON_STEP_BEGIN = "on_step_begin"
    ON_SUBSTEP_END = "on_substep_end"
    ON_PRE_OPTIMIZER_STEP = "on_pre_optimizer_step"
    ON_OPTIMIZER_STEP = "on_optimizer_step"
    ON_STEP_END = "on_step_end"
    ON_EVALUATE = "on_evaluate"
    ON_PREDICT = "on_predict"
    ON_PREDICTION_STEP = "on_prediction_step"
    ON_SAVE = "on_save"
    ON_LOG = "on_log"
    # transformers fires it before pushing to the Hub; this Trainer never pushes (push_to_hub refuses), so it fires
    # only when user code calls `callback_handler.on_push_begin(...)`. It exists so that ported callbacks register.
    ON_PUSH_BEGIN = "on_push_begin"


EVENT_NAMES = frozenset(e.value for e in Event)
