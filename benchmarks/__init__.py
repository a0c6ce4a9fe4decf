"""Speed targets, measured side by side in one process (``python -m benchmarks.pipelines``)."""
