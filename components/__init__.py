"""gpu-platform components, one folder per kind of thing; imports run only down this list.

- `facts/`: data tables with their sources (GPU catalog, capacity, chart pins, regions, limits,
  prices, AWS facts, the rule catalog). Imports nothing of ours but other facts.
- `spec/`: the stack file's spec, the one place user input is checked. Imports facts.
- `pools`, `naming`, `node_resources`, `tenancy`, `trainer_image` (the modules beside this file):
  pure derivations the wings, the layer and the jobs share. Import facts and spec.
- `aws/`, `gcp/`, `kubernetes/`: the cloud wings and the cloud-independent GPU layer
  (ComponentResources and their pure plans). Import the derivations and below; a wing may use the
  layer's small interface (`kubernetes.DataVolume`).
- `jobs/`: the JobSet renderer behind `gpu-platform job` and what only it uses. Imports the wings'
  and the layer's constants and below.
- `checks/`: what reads synthesized resources the way their consumers do (policy rules, the fit
  proof, tenancy isolation). Imports jobs and below.

docs/architecture.md draws the house; tests/test_architecture.py holds it to this order.
"""
