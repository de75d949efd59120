"""Built-in credit assigners, one module per method, each registered through the ``agentbench_crbc`` entry points."""
