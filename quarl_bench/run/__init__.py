"""Running work: the runner plans a study's works and stores their rows; executors run them (this process,
processes, Ray)."""
