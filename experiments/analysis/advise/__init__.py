"""What ``python -m digest advise`` learns from the committed runs and how well it predicts them
(docs/methods.md section 13; ``python -m experiments.advise`` writes and checks each): the runs
themselves (``runs``), the epochs-to-target table (``table``: digest/advise/convergence.json), the
time model's constants (``fit``: digest/advise/calibration.json) and the model against the points
it was not fitted on (``check``: results/advise/, which experiments/render/advise.py writes)."""
