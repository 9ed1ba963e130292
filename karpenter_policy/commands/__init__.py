"""The policy commands of the CLI, each a module (or package) of its own on top of the checking engine.

`check` and `test` (the PR gate), `diff` (two revisions compared, with the cost comment of `costcomment`), `compile`
(constraint sets and manifests), `fmt`, `pin`, `catalog` and `rules` (the rule catalog explained). They read
policies only through `karpenter_policy.checks`; `filestaging` is how the commands that write files write them.
"""
