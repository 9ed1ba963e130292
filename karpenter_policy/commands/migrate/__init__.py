"""`migrate`: v1alpha5 Provisioners and AWSNodeTemplates rewritten as Karpenter v1 NodePools and EC2NodeClasses,
each NodePool proven to admit what its Provisioner did (`command`, `notes`, `documents`; docs/migrate.md)."""
