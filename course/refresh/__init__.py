"""Engine releases: `course outdated` (recorded against the package index) and `course refresh`
(plan, wheels, runs, diff, pins and report of a move to a new release)."""
