# A trace for `gpu-platform simulate` from a cluster's finished Kueue Workloads (kueue.x-k8s.io/v1beta2).
#   kubectl get workloads.kueue.x-k8s.io -A -o json | jq -r -f examples/traces/workloads-to-trace.jq > trace.csv
# One row per finished workload: submitted at its creation (seconds after the first one), the team
# is its namespace, the tier its WorkloadPriorityClass, the pool the flavor Kueue admitted its GPUs
# on, nodes its first pod set's count, GPUs per node that pod's nvidia.com/gpu request, and the
# run time from its last PodsReady to Finished plus the time of earlier runs it lost to evictions
# (status.accumulatedPastExecutionTimeSeconds). Checkpoint intervals are not in the cluster: add
# the column yourself where you know them.
def seconds: sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601;
def condition($type): [.status.conditions[]? | select(.type == $type and .status == "True")][0].lastTransitionTime;

[.items[] | select(condition("Finished") != null and condition("PodsReady") != null)] as $done
| ($done | map(.metadata.creationTimestamp | seconds) | min) as $start
| "id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s",
  ($done | sort_by(.metadata.creationTimestamp)[]
    | [ .metadata.namespace + "/" + .metadata.name,
        (.metadata.creationTimestamp | seconds) - $start,
        .metadata.namespace,
        (.spec.priorityClassRef.name // "standard"),
        .status.admission.podSetAssignments[0].flavors["nvidia.com/gpu"],
        .spec.podSets[0].count,
        (.spec.podSets[0].template.spec.containers[0].resources.requests["nvidia.com/gpu"] | tonumber),
        (condition("Finished") | seconds) - (condition("PodsReady") | seconds)
          + (.status.accumulatedPastExecutionTimeSeconds // 0)
      ]
    | @csv)
