"""Two labellers of the same held-out entries, scored against each other: the grouping's ceiling.

usage: python -m bench.run_all label_agreement  (the figures: evaluation/agreement.py)
"""

from evaluation.agreement import run

__all__ = ["run"]
