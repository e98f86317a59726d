"""`handoff.json`: only completed + comparable candidates per scenario, the recommendation, and the sweeps'
advice (up to which concurrency, which proposal length) for the deployment decision. Its schema (`Handoff` and its
parts) is `records.handoff`.

- `build`: `build_handoff` from the evidence and the group results
- `advice`: the sweeps' advice, with the measured engine's per-batch-size cut-off
- `mix`: the answer for the plan's traffic mix: the best single configuration first (`single`), routing second
- `traffic`: what the mix reads, and each configuration's cells
"""
