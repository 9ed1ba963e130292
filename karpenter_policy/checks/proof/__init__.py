"""Proving policies: the solver on provisioners (check), and workloads placed by the scheduler."""
