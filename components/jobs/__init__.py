"""The JobSet renderer behind `gpu-platform job`, and what only it uses.

`renderer` turns a job request into a JobSet for a stack's pool, team and tier; `trainer_args`
checks trainer arguments with the trainer's own parser; `image_ref` checks image references;
`grace` sizes the grace period for a preset's checkpoint.

Imports: facts, spec, the shared derivations, and the constants of the wings and the GPU layer
(labels, queue names, priority tiers) that a job must agree with.
"""
