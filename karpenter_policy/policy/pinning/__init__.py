"""Pinning workloads: PinningPolicy rules, and `pin` writing what they require into manifests."""
