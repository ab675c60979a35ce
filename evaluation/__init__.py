"""The grouping's evaluation: labelled sets by split, the scorer, and the runner.

One importable package for the tests, ``bench/`` and ``scripts/`` (run them from the repository
root as modules: ``python -m bench.run_all``). Every set names its split: ``train`` (the theme
pack's models were trained on it), ``dev`` (read while tuning) or ``heldout`` (never read per
entry, never tuned on; only aggregate F1 is looked at).
"""
