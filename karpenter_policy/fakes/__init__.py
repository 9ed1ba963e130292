"""Stand-ins for the outside world, for tests, benchmarks and the simulator — never imported by production code.

`cluster`: an in-memory Kubernetes API (the `kube.cluster.Cluster` protocol), whose writes a test can observe;
`cloud`: an in-memory cloud provider (the `cloud.provider.CloudProvider` protocol); `queue`: an in-memory
interruption queue (`cloud.queue`), and `eventbridge` the messages AWS puts on it. An import-linter contract keeps
every production package from importing this one.
"""
