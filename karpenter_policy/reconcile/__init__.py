"""The reconciler: launch EC2 nodes for pending pods from compiled constraint sets, as Karpenter's provisioner.

Watch → batch (`provisioning.batcher`) → schedule (the `scheduling` package, the code of `check --workloads`) →
launch (`provisioning.launcher`, through a `cloud` provider) → register the Node (`provisioning.registration`) →
bind (`provisioning.binder`); beside it disruption, termination, interruption and garbage collection, each a package
of its own. `controller` composes them, `runner` drives them in real time and `command` starts them
(`karpenter-policy reconcile`). It reads the compiled constraint sets (`constraints`) and never imports the checks or
the commands: it runs without the solver. The simulator (`karpenter_policy.simulate`) drives the same controllers in
virtual time.
"""
