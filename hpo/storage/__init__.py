"""The Optuna database of a study (SQLite by default, PostgreSQL to share it between machines).

    urls.py       the shapes of database URLs: SQLite file, PostgreSQL driver, redaction for messages
    database.py   `create_storage` (SQLite in WAL mode with BEGIN IMMEDIATE; PostgreSQL), `claim_lock`
    claim_session.py  the session holding the claim lock on PostgreSQL: a trial is created only while it holds it
    study_db.py   open or load a study with its sampler and pruner, count its trials; the only module that touches
                  Optuna's private attributes
    rung_sampler.py  the multi-fidelity TPE: learns from every rung value, paused and running trials included
    stop_rungs.py the pruner of `scheduler: {type: asha}` (mode stop): rungs at fractions of each trial's length
    attempts.py   a configuration's attempts: a retry and the attempts it continues (`requeued_from_trial`)
    retry.py      fail a crashed, interrupted or stale trial and queue it again, resuming from its checkpoint
    folder_owner.py  which study an output folder belongs to (a marker file): another study's folder is refused
    retention.py  bound the disk after each trial (`study.keep_checkpoints`)
    outage.py     ride out a storage that stops answering: backoff with jitter, up to `storage.outage_timeout`
    riding.py     the RDBStorage every storage is: its calls ride out outages (`create_storage` returns one)

Submodules are imported by name; this package imports nothing, so `hpo.storage.urls` stays cheap for the dashboards.
"""
