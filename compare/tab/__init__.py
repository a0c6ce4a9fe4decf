"""The Pipeline compare tab in TensorBoard: two profile sessions of a logdir compared, from the
same library call as ``compare.run`` (:mod:`compare.tab.plugin`, the entry point)."""
