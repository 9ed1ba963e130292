"""The Karpenter kinds as documents: Provisioner and AWSNodeTemplate (v1alpha5), NodePool and EC2NodeClass (v1).

`schema` (the CRDs' JSON Schemas), `defaults` (Karpenter's defaulting webhook), `provisionerrules` and `aws`
(Karpenter's core and AWS validation rules, as `violations` with field paths), `kinds` (the kinds read) and
`objects` (typed Provisioner and AWSNodeTemplate views), `constraintset` (what `compile` writes and the controller
reads) with its complete check (`constraintcheck`), `workloads` (the kinds with a pod template and their
replicas). It imports only `model`: no solver, no network.
"""
