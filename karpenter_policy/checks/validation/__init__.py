"""Validating files of policies, without a solver — what `validate` runs, and the first stage of `check`, `test`,
`compile`, `diff` and `pin` (through `checks.repository`) and of the webhook (`check_document`): each document
identified (a Karpenter object, a PinningPolicy, a PlacementTest; other YAML counted and skipped), checked against
its JSON Schema and Karpenter's defaulting and webhook rules as `api/` declares them (`policies`; Karpenter v1
objects through `api.v1`'s admission in `v1`), each finding placed at its file:line:column and filtered by the
suppression comments; then the rules across objects (a name defined twice, a reference to nothing).
"""
