"""The policy rules as pure functions over resources as the Pulumi engine receives them, by family.

`base` holds what every rule shares (the context, violations, findings); the families are `pools`
(GPU pools: taints, scale, spot, every job fits), `security`, `lifecycle`, `scheduling`,
`teams`, `fabric` and `karpenter` (destroy order of its permissions); `registry` maps each rule id of components.facts.rule_catalog to its function and
evaluates a whole stack. The same functions run in `gpu-platform check`, `review` and the
CrossGuard pack (policy/). A new rule: a row in the catalog, a function in its family, a line in
the registry.

Imports: the checks' readers (declared, fit, isolation) and everything below them.
"""
