"""Reading policies and workloads: files, templates, git revisions (positions kept for every finding)."""
