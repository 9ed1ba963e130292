"""Comparing two versions of the policies (diff): what each admits that the other does not."""
