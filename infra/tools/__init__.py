"""The tools over a synthesis: they read what the offline engine produced, never build it.

`check` runs the policy rules and schema validation, `review` compares two commits' syntheses,
`summary` writes summary.md (pools and $/h), `simulate/` replays a job trace against what a
stack deploys.

Imports: components/ and the offline engine (infra.synth, infra.stackfile, infra.output_folder);
never infra.cli.
"""
