"""Karpenter v1 NodeClaims for the nodes the controller launches for a NodePool: the object (`objects`), its status
conditions (`conditions`) and the controller's writes to it (`writer`). A v1alpha5 Provisioner's nodes have none,
as in Karpenter v0.31 (docs/reconcile.md, "Karpenter v1 NodePools")."""
