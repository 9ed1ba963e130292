"""Karpenter v1 objects — NodePool and NodeClaim (`karpenter.sh/v1`), EC2NodeClass (`karpenter.k8s.aws/v1`) —
checked exactly as Karpenter v1.14.1 admits them: its CRDs (shipped in `schemas/crds/`), the API server's
structural defaulting and OpenAPI validation (`structural`), the CRDs' CEL rules (`cel`), and NodePool's
RuntimeValidate (`nodepool`); `admission` runs them in the API server's order. See docs/v1.md.
"""
