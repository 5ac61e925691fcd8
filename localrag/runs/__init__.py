"""The evaluation command: options, defaults, the plan, the indexes a run opens, its rows, outputs and suites."""
