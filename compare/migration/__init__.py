"""Static migration help for TF1 input pipelines: the pieces behind ``python -m compare.migrate``.

- :mod:`.source`    a file's text to a syntax tree: notebooks' code cells, Python 2 rewritten.
- :mod:`.rules`     what we recognise (by qualified name), its TF2 replacement, pitfalls, our port.
- :mod:`.scan`      reads a script with :mod:`ast` (never runs it), resolves aliases, finds uses.
- :mod:`.values`    the abstract values, streams and module index of the symbolic run.
- :mod:`.flow`      the symbolic run of the pipeline-building code, one entry function at a time.
- :mod:`.calls`     what each call does in that run (producers, readers, queues, batchers, ...).
- :mod:`.pipelines` runs to typed plans: one per pipeline function and batch/dequeue call.
- :mod:`.model`     the typed plan (source, reader, per-example steps, queues, batching, seeds).
- :mod:`.chain`     a plan's tf.data code; :mod:`.legend` what each name in it stands for.
- :mod:`.plan`      the plan paragraph and the ``tf_upgrade_v2`` comparison.
- :mod:`.render`    the text report and the JSON document.
"""
