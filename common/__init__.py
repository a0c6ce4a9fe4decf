"""Pieces shared by legacy/, modern/ and compare/: the stage vocabulary, input discovery,
clean errors for the CLIs, atomic artifact writes and TensorFlow log handling."""
