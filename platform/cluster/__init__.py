"""The cluster a search runs on: how many trials it holds at once (``resources``), the nodes an
autoscaler may still add (``autoscaling``), starting or joining Ray (``ray_cluster``) and what the
run ran on (``environment``)."""
