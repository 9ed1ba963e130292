"""karpenter-policy: Karpenter Provisioner policies as code — validate, prove, compile, admit, reconcile."""

__version__ = "0.1.0"
