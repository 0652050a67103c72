"""The labelled verdict corpus under ``fixtures/verdicts/`` (issues 12 and 25), as data.

``table`` holds every case as one declarative entry (``cases_*``: pattern tags, source, builder,
labels, reasoning); ``builders`` and ``spans`` are the reusable pieces the ``agents_*`` and
``traces_*`` builders are written with; ``docs`` writes ``docs/verdicts.md`` from the table.
``scripts/make_verdict_corpus.py`` is the command.
"""
