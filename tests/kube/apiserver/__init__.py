"""The parts of the test API server (tests/kube/emulator.py) beyond storage, one job each: the kinds it serves
besides the package's (`kinds`), OpenAPI (`openapi`), authentication and RBAC (`rbac`), and the control plane a
real cluster runs beside its API server — the Deployment and ReplicaSet controllers (`workloads`), a kube-scheduler
stand-in (`scheduler`), kubelets (`kubelet`) and the thread that runs them (`controlplane`)."""
