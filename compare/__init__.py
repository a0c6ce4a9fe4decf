"""Load TensorFlow traces of any vintage into one event model, map ops to pipeline stages,
compare the legacy and modern runs, and explain a trace in words and numbers."""
