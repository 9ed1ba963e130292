"""The reconciler: launch EC2 nodes for pending pods from compiled constraint sets, as Karpenter's provisioner.

Watch → batch (`batcher`) → schedule (the `scheduling` package, the code of `check --workloads`) → launch
(`launcher`, through a `cloud` provider) → register the Node (`nodes`) → bind (`binder`), one pass at a time
(`controller.Controller.reconcile_once`), driven in real time by `runner` and started by `command` (`karpenter-policy
reconcile`). It reads the compiled constraint sets (`constraints`) and never imports the policy package: it runs
without the solver. `kubelet.FakeKubelet` stands in for the kubelets of an in-memory cluster.
"""
