"""The checking engine: what every command and the webhook share to read and judge policies.

`source` reads files, Helm/Kustomize renderings and Git revisions into documents with positions; `validation` checks
each document (JSON Schema and Karpenter's rules, from `api`) and applies suppression; `proof` proves whole sets of
provisioners with the solver and places workloads with the scheduler; `pinning` holds the PinningPolicy rules;
`findings`, `reporters` and `ruledocs` are the findings and how they are written; `repository` reads a policy
repository once, for every reader of one. Nothing here is a command: the commands (`karpenter_policy.commands`) and
the webhook call it.
"""
