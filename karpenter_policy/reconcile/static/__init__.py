"""Static NodePools (`spec.replicas`) as Karpenter v1.14.1 keeps them with its `StaticCapacity` feature gate on (core
pkg/controllers/static/): `provisioning` launches NodeClaims up to `replicas` (bounded by `limits.nodes`, not
through pod scheduling), `deprovisioning` deletes the excess when `replicas` goes down, both counting a NodePool's
claims as v1.14.1's `NodePoolState` does (`state.nodepoolcounts`), launching from the static template
(`staticclaim`). Static drift, which v1.14.1 runs whatever the gate, is the disruption decider's
(`disruption.decider`, over the same two).
"""
