"""Talking to Kubernetes: the ``Cluster`` protocol, its in-memory and API-server implementations, and the
helpers built on any cluster (informer cache, leader election, event recorder).

``client`` is the only module that imports the ``kubernetes`` package; everything else works on JSON dicts.
"""
