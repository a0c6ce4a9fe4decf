"""The port: a tf.data input pipeline (read, decode, resize, crop) feeding the seed's
augmentation as one ``tf.function(jit_compile=True)`` with static input shapes."""
