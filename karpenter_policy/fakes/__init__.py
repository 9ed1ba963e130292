"""Stand-ins for the outside world, for tests, benchmarks and the simulator — never imported by production code.

`cluster`: an in-memory Kubernetes API (the `kube.cluster.Cluster` protocol); `cloud`: an in-memory cloud provider
(the `cloud.provider.CloudProvider` protocol); `queue`: an in-memory interruption queue (`cloud.queue`).
An import-linter contract keeps every production package from importing this one.
"""
