"""Where a run executes when not here: the SSH target and its host-side supervisor, the SkyPilot
fleet.
"""
