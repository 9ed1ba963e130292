"""`plan BASE HEAD [PATHS] --snapshot FILE`: what a policy change will do to the running fleet (docs/plan.md).

The package, one job per module: `snapshot` reads what `kubectl get
nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json` printed and refuses what it cannot trust;
`fleet` turns the snapshot into the nodes and pods the plan reasons about, with `volumes` (the pods' volumes'
topology, read as the controller reads it); `drift` says which nodes drift or expire (Karpenter v0.31's rules) and
why, naming the field; `waves` orders
their replacement as Karpenter v0.31's deprovisioning does and times it; `nodepooldrift` and `nodepoolwaves` do
the same for Karpenter v1 NodePools' nodes (v1.14.1's rules: hash versions, disruption budgets, forceful expiry,
terminationGracePeriod) — both in virtual time over one `room`, with `pdbstate`'s PodDisruptionBudgets at each
moment and `rolloutbudget`'s `--rollout-timeout`; `cost` prices the fleet before, at the peak and after; `render`
writes text, JSON and markdown; `command` ties them to BASE and HEAD and picks the exit code; `options` holds the
command's flags.
"""
