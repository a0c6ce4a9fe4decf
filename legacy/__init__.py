"""The seed's TF 1.1 queue-runner pipeline, rewritten on TF 2.21's ``tf.compat.v1`` graph APIs."""
