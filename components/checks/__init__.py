"""What reads synthesized resources the way their consumers do.

`declared` is the common reading of a resource (the same shape in an offline synthesis and in a
real preview), `quantities` reads Kubernetes quantities back, `rules` holds the policy rules,
`fit` the proof that every job the renderer accepts can start, `isolation` the tenancy checks.
The same functions run in `gpu-platform check`, in `review` and in the CrossGuard pack (policy/).

Imports: everything in components/ below it (facts, spec, derivations, wings and layer
constants, the job renderer); never the infra/ tools.
"""
