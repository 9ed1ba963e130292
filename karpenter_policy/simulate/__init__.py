"""The simulation behind `karpenter-policy simulate`: the real controller, against an in-memory cluster and EC2
served by moto's server in the same process, driven in virtual time.

* `server`: moto's server on a loopback port, with what moto does not serve answered in front of it (the public
  SSM parameters of the default AMIs, the spot price history);
* `account`: the VPC, subnets, security groups, images and launch templates the constraint sets' node templates
  select, created in that account;
* `workloads`: workload manifests (replicas of a pod template, DaemonSets) to the pods and objects of a cluster;
* `driver`: the cluster, the kubelets' stand-in, the AWS provider and the controller on one virtual clock; the
  scenario's steps applied in order, each run until nothing more happens;
* `measure`: what the cluster shows at a moment — pods pending, starting and running, the nodes with their
  packing and price;
* `spot`: spot interruptions sent on an in-memory queue and handled by the controller's interruption handler;
* `timeline`, `table`, `charts` and `report`: the figures over time, the node table and fleet $/h printed at the
  end, and the self-contained HTML report with its charts;
* `command`: `karpenter-policy simulate`, options in, the run and its report out;
* `clock`, `kubelet`, `aws` and `scene`: the virtual clock, the kubelets' stand-in, moto's EC2 as a cloud
  provider, and the scene the testing API (:mod:`karpenter_policy.testing`) builds on.

Nothing here talks to real AWS: every endpoint is the loopback server, with dummy credentials given to the
boto3 session only (see `server`).
"""
