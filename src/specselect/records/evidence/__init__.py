"""The evidence's records: the pure types of `Evidence` (`evidence.json`) and of every part it nests, with their
schema versions and the rule texts they carry by default.

One module per concept of `specselect._evidence`, named after it: `evidence.X` computes what `records.evidence.X`
defines, so the hand-off, the report and the API read evidence without importing the statistics that made it.
"""
