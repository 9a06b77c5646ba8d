"""``pybroker demo``: the seeds' routing examples and a wire demo."""
