"""Static migration help for TF1 input pipelines: the pieces behind ``python -m compare.migrate``.

- :mod:`.rules`   what we recognise (by qualified name), its TF2 replacement, pitfalls, our port.
- :mod:`.scan`    reads a script with :mod:`ast` (never runs it), resolves aliases, finds uses.
- :mod:`.plan`    the one-paragraph tf.data plan and the ``tf_upgrade_v2`` comparison.
- :mod:`.render`  the text report and the JSON document.
"""
