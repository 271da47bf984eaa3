"""Runnable examples shipped with nsroof (`python -m nsroof.examples.train_tiny`)."""
