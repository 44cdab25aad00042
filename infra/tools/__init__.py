"""The tools over a synthesis: they read what the offline engine produced, never build it.

`check` runs the policy rules and schema validation, `review` compares two commits' syntheses,
`summary` writes summary.md (pools and $/h), `simulate/` replays a job trace against what a
stack deploys; `parallel` spreads independent stacks over the cores and `synth_cache` keeps
syntheses under build/synth-cache for review and simulate to reuse.

Imports: components/ and the offline engine (infra.synth, infra.stackfile, infra.output_folder);
never infra.cli.
"""
