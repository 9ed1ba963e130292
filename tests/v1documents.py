"""Karpenter v1 documents the CLI tests write beside their NodePools: the one EC2NodeClass (`default`, with the
role and the three selector terms v1.14.1 requires) that every NodePool of those tests points at."""

from __future__ import annotations

from textwrap import dedent

#: The EC2NodeClass `default`, as a document that follows another in the same file (it opens with `---`).
EC2_NODE_CLASS = dedent("""\
    ---
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata:
      name: default
    spec:
      role: KarpenterNodeRole-demo
      subnetSelectorTerms:
        - tags:
            karpenter.sh/discovery: demo
      securityGroupSelectorTerms:
        - tags:
            karpenter.sh/discovery: demo
      amiSelectorTerms:
        - alias: al2023@latest
    """)
