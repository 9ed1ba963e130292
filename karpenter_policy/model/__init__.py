"""The vocabulary every layer shares, with Karpenter v0.31's semantics and no I/O: quantities and resources,
requirements as sets, taints and tolerations, label selectors, well-known labels, instance types and their
offerings, what a node offers (allocatable) and what a pod asks (requests, topology), AMI families.

The bottom layer: it imports no other package of karpenter_policy.
"""
