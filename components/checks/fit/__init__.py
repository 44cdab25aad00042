"""The fit proof (`job-fits-pool`): every job `gpu-platform job` accepts can start on what the stack
declares. `proof` renders the jobs and judges them; `kueue`, `nodes` and `cluster` read the
declared objects as Kueue, the autoscaler and the kubelet do; `shapes` holds what they compare.

Imports: the job renderer, the declared-resource readers and everything below them.
"""
