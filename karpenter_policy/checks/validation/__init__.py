"""Validating policy documents: JSON Schema, then Karpenter's own defaulting and webhook rules."""
