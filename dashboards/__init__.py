"""Trial dashboards: a live, read-only web dashboard (`hpo dashboard`) and a static HTML report (`hpo report`).

    optuna_source.py  Optuna studies from a storage URL, read-only, through Optuna's public API
    store_reader.py   the experiment store's tables (runs, metrics, events, artifacts), read-only
    serialize.py      trials and studies as JSON-ready dicts
    importance.py     parameter importance, computed in the background and cached
    api.py            the JSON API the pages poll (and the report embeds)
    server.py         the HTTP server: fixed pages, fixed static files, the API; GET only, localhost by default
    report.py         one self-contained HTML file
    locate.py         a study/run file or storage URL -> where to read
    static/, templates/  the pages' scripts and style (Plotly comes from the installed `plotly` package)

See dashboards/README.md.
"""
