"""`fmt`: Karpenter's defaults made explicit and a canonical key order for Provisioners and AWSNodeTemplates,
rewritten in place through ruamel.yaml's round trip (comments, quoting and untouched documents preserved)."""
