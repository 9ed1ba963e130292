"""Talking to Kubernetes: the ``Cluster`` protocol, its API-server implementation (``client``), and the helpers
built on any cluster (informer cache, leader election, event recorder, eviction verdicts). The in-memory cluster is
:mod:`karpenter_policy.fakes.cluster`. It imports only `model`.

``client`` is the only module that imports the ``kubernetes`` package; everything else works on JSON dicts.
"""
