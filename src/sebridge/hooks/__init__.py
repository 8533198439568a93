"""Readiness hooks: the operator's programs that make a VM ready before an approval goes out."""
